// An in-process fake scheduler (TaskService) and history (JournalService, its Session stream
// included) on one port, recording what workers send.

import grpc from '@grpc/grpc-js';
import { loadProtos } from '../src/proto.js';
import { toPayload, toTimestamp } from '../src/payload.js';
import { RetryPolicy } from '../src/retry.js';

export class FakeCluster {
  constructor() {
    this.hellos = [];
    this.messages = []; // everything workers sent after their hello
    this.journalCalls = [];
    this.streams = [];
    this.loadStep = {
      workflow_type: 'order',
      step_type: 'charge',
      input: toPayload({ amount: 2 }),
      attempt: 1,
      retry: new RetryPolicy().toProto(),
    };
    this.loadJournal = {}; // what LoadJournal answers
    this.waiters = [];
  }

  async start() {
    const { TaskService, JournalService } = loadProtos();
    this.server = new grpc.Server();
    this.server.addService(TaskService.service, {
      Connect: (stream) => {
        this.streams.push(stream);
        let first = true;
        stream.on('data', (message) => {
          if (first) {
            first = false;
            this.hellos.push(message.hello);
            stream.write({ welcome: { session_id: 'abc', lease_ttl: { seconds: 1 }, heartbeat_interval: { nanos: 100_000_000 } } });
          } else {
            this.messages.push(message);
          }
          this._notify();
        });
        stream.on('end', () => stream.end());
        stream.on('error', () => {});
      },
      // Renews every lease for the welcome's TTL (1 s), on this process's clock.
      RenewLeases: (call, callback) => {
        const now = Date.now();
        const renewed = call.request.leases.map((lease) => ({ lease, expire_time: toTimestamp(now + 1000) }));
        callback(null, { now: toTimestamp(now), renewed });
      },
    });
    /** @type {Record<string, any>} */
    const journal = {};
    const answer = (method, request) => {
      this.journalCalls.push([method, request]);
      this._notify();
      if (method === 'LoadJournal') return this.loadJournal;
      return method === 'LoadStep' ? this.loadStep : {};
    };
    for (const method of Object.keys(JournalService.service)) {
      journal[method] = (call, callback) => callback(null, answer(method, call.request));
    }
    // The worker's journal calls come on a Session stream, matched to answers by id.
    journal.Session = (stream) => {
      stream.on('data', (message) => {
        const answers = message.calls.map((call) => {
          const method = call.call.replace(/(^|_)([a-z])/g, (_, __, letter) => letter.toUpperCase());
          return { id: call.id, [call.call]: answer(method, call[call.call]) };
        });
        stream.write({ answers });
      });
      stream.on('end', () => stream.end());
      stream.on('error', () => {});
    };
    this.server.addService(JournalService.service, journal);
    this.port = await new Promise((resolve, reject) =>
      this.server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (error, port) => (error ? reject(error) : resolve(port))),
    );
    this.address = `127.0.0.1:${this.port}`;
  }

  _notify() {
    for (const waiter of [...this.waiters]) waiter();
  }

  /** Resolve once `predicate()` holds (checked on every message); bounded. */
  until(predicate, what, ms = 5000) {
    return new Promise((resolve, reject) => {
      const check = () => {
        if (predicate()) {
          this.waiters = this.waiters.filter((w) => w !== check);
          clearTimeout(timer);
          resolve();
        }
      };
      const timer = setTimeout(() => {
        this.waiters = this.waiters.filter((w) => w !== check);
        reject(new Error(`timed out waiting for ${what}`));
      }, ms);
      this.waiters.push(check);
      check();
    });
  }

  push(task, stream = this.streams[this.streams.length - 1]) {
    stream.write({ task });
  }

  stop() {
    this.server.forceShutdown();
  }
}
