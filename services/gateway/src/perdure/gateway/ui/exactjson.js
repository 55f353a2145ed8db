// JSON read and written with its numbers exactly as the API sent them: a payload's
// 18446744073709551617 or 1.0 is shown (and sent back) as written, never through a float.
// A number whose text a JavaScript number would not give back (2**64 + 1, 1.0, 1e400) is kept
// as a JsonNumber holding its text; every other value is plain JSON (the API's own fields).

export class JsonNumber {
  constructor(text) { this.text = text; }
  valueOf() { return Number(this.text); }
  toString() { return this.text; }
}

const TOKEN = /\s*(?:("(?:[^"\\\u0000-\u001f]|\\["\\/bfnrt]|\\u[0-9a-fA-F]{4})*")|(-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?)|(true|false|null)|([{}[\]:,]))/y;

/** Parse JSON text, inexact numbers as JsonNumber; SyntaxError naming the offset otherwise. */
export function parseExact(text) {
  let at = 0;
  const next = () => {
    TOKEN.lastIndex = at;
    const match = TOKEN.exec(text);
    if (!match) throw new SyntaxError(`not JSON at offset ${at}`);
    at = TOKEN.lastIndex;
    return match;
  };
  const value = (token = next()) => {
    const [, string, number, word, mark] = token;
    if (string !== undefined) return JSON.parse(string);
    if (number !== undefined) return String(Number(number)) === number ? Number(number) : new JsonNumber(number);
    if (word !== undefined) return word === "null" ? null : word === "true";
    if (mark === "[") {
      const out = [];
      let item = next();
      if (item[4] === "]") return out;
      for (;;) {
        out.push(value(item));
        const sep = next()[4];
        if (sep === "]") return out;
        if (sep !== ",") throw new SyntaxError(`expected ',' or ']' at offset ${at}`);
        item = next();
      }
    }
    if (mark === "{") {
      const out = {};
      let key = next();
      if (key[4] === "}") return out;
      for (;;) {
        if (key[1] === undefined) throw new SyntaxError(`expected a key at offset ${at}`);
        if (next()[4] !== ":") throw new SyntaxError(`expected ':' at offset ${at}`);
        Object.defineProperty(out, JSON.parse(key[1]), { value: value(), enumerable: true, writable: true, configurable: true });
        const sep = next()[4];
        if (sep === "}") return out;
        if (sep !== ",") throw new SyntaxError(`expected ',' or '}' at offset ${at}`);
        key = next();
      }
    }
    throw new SyntaxError(`unexpected '${mark}' at offset ${at}`);
  };
  const result = value();
  if (text.slice(at).trim()) throw new SyntaxError(`unexpected text at offset ${at}`);
  return result;
}

/** JSON text of a value, each JsonNumber written as its text; `indent` as JSON.stringify's. */
export function stringifyExact(value, indent = 0, depth = 0) {
  if (value instanceof JsonNumber) return value.text;
  if (value === null || value === undefined || typeof value !== "object") {
    return JSON.stringify(value ?? null);
  }
  const pad = indent ? `\n${" ".repeat(indent * (depth + 1))}` : "";
  const end = indent ? `\n${" ".repeat(indent * depth)}` : "";
  const colon = indent ? ": " : ":";
  const items = Array.isArray(value)
    ? value.map((item) => stringifyExact(item, indent, depth + 1))
    : Object.entries(value)
      .filter(([, item]) => item !== undefined)
      .map(([key, item]) => `${JSON.stringify(key)}${colon}${stringifyExact(item, indent, depth + 1)}`);
  if (!items.length) return Array.isArray(value) ? "[]" : "{}";
  const [open, close] = Array.isArray(value) ? ["[", "]"] : ["{", "}"];
  return `${open}${pad}${items.join(`,${pad}`)}${end}${close}`;
}
