-- Flow control: a run's flow settings (a serialized perdure.api.common.v1.RunFlow, NULL: none),
-- kept with the run and carried to the runs that follow it (continue-as-new, reset, fork); and
-- on a scheduling request, the run's and, for a remote step, the step's settings
-- (a serialized StepFlow), which the relay sends the scheduler as the task's TaskFlow.
ALTER TABLE workflows ADD COLUMN flow bytea;
ALTER TABLE outbox ADD COLUMN run_flow bytea, ADD COLUMN step_flow bytea;
