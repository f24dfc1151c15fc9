// Verifies an evalmeter receipt with Node.js alone, no evalmeter code: written from RFC 9421
// (§2.5 the signature base, §3.3.6 Ed25519) and RFC 9530 (Content-Digest), for a third party
// that wants to check a receipt with its own tools. It handles the components evalmeter signs
// and its field formats only; a general verifier parses RFC 8941 structured fields in full.
//
// Usage: node verify-receipt.mjs receipt.json keys.json
//   receipt.json: evalmeter submit --receipt; keys.json: the service's
//   /.well-known/evalmeter/receipt-keys.json (or evalmeter receipt-keys).
// Exit status 0 when the signature and the Content-Digest hold, 1 otherwise.
import { readFileSync } from "node:fs";
import { createHash, createPublicKey, verify } from "node:crypto";

const r = JSON.parse(readFileSync(process.argv[2], "utf8"));
const keys = JSON.parse(readFileSync(process.argv[3], "utf8")).keys;

const fail = (why) => { console.log(`FAILED: ${why}`); process.exit(1); };
// The label evalmeter, once in each field.
for (const f of ["signature-input", "signature"]) {
  if ((r.headers[f] || "").match(/(?:^|,)\s*evalmeter\s*=/g)?.length !== 1) fail(`${f} has no single evalmeter signature`);
}
// Signature-Input: evalmeter=("@status" ... "@target-uri";req);created=N;keyid="K";alg="ed25519"
const input = r.headers["signature-input"].match(/(?:^|,\s*)evalmeter=(\(.*?\)(?:;[^,]*)*)/)[1];
const components = [...input.match(/^\((.*)\)/)[1].matchAll(/"([^"]+)"(;req)?/g)];
const covered = new Set(components.map((c) => c[0]));
for (const c of ['"@status"', '"content-type"', '"content-digest"', '"evalmeter-client"', '"evalmeter-session"', '"@method";req', '"@target-uri";req']) {
  if (!covered.has(c)) fail(`the signature does not cover ${c}`);
}
if (!/;alg="ed25519"/.test(input) || !/;created=\d+(;|$)/.test(input)) fail("alg is not ed25519, or created is missing");
const keyid = input.match(/;keyid="([^"]+)"/)[1];
const created = new Date(Number(input.match(/;created=(\d+)/)[1]) * 1000);
const signature = Buffer.from(r.headers["signature"].match(/(?:^|,\s*)evalmeter=:([^:]+):/)[1], "base64");

const value = ([, name, req]) => {
  if (name === "@status") return String(r.status);
  if (name === "@method" && req) return r.request.method;
  if (name === "@target-uri" && req) return r.request.target_uri;
  if (name.startsWith("@") || req) throw new Error(`component ${name} not handled here`);
  return r.headers[name].trim();
};
const base = components.map((c) => `${c[0]}: ${value(c)}`).join("\n") + `\n"@signature-params": ${input}`;

const jwk = keys.find((k) => k.kid === keyid);
if (!jwk) fail(`key ${keyid} is not in the key set`);
const ok = verify(null, Buffer.from(base), createPublicKey({ key: jwk, format: "jwk" }), signature);
const digest = "sha-256=:" + createHash("sha256").update(r.body).digest("base64") + ":";
console.log(`signature: ${ok ? "valid" : "INVALID"}; content-digest: ${r.headers["content-digest"] === digest ? "matches" : "DOES NOT MATCH"} the body`);
if (ok) console.log(`client ${r.headers["evalmeter-client"]}, session ${r.headers["evalmeter-session"]}, at ${created.toISOString()}, key ${keyid}`);
process.exit(ok && r.headers["content-digest"] === digest ? 0 : 1);
