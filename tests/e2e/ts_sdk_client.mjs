// A client on the official TypeScript SDK (@agentclientprotocol/sdk 2.4.0), driving `gatewright acp` as an editor
// does: initialize with the newer capabilities, a two-root session (additionalDirectories), a prompt whose updates it
// collects, then logout. Usage: node ts_sdk_client.mjs SDK_DIR CWD EXTRA_DIR -- AGENT_COMMAND...
// Prints one JSON object: what the SDK saw (its own parsed view of every frame).
import { spawn } from "node:child_process";
import { Readable, Writable } from "node:stream";
import { pathToFileURL } from "node:url";
import path from "node:path";

const [sdkDir, cwd, extra, sep, ...agent] = process.argv.slice(2);
if (sep !== "--" || agent.length === 0) throw new Error("usage: SDK_DIR CWD EXTRA_DIR -- AGENT_COMMAND...");
const acp = await import(pathToFileURL(path.join(sdkDir, "node_modules/@agentclientprotocol/sdk/dist/v1/stable/acp.js")).href);

const child = spawn(agent[0], agent.slice(1), { stdio: ["pipe", "pipe", "inherit"] });
const seen = { permissions: [], updates: [] };
const stream = acp.ndJsonStream(Writable.toWeb(child.stdin), Readable.toWeb(child.stdout));
const app = acp.client({ name: "ts-sdk-test" }).onRequest("session/request_permission", async (ctx) => {
  const options = ctx.params.options;
  seen.permissions.push({ toolCall: ctx.params.toolCall, kinds: options.map((o) => o.kind) });
  const allow = options.find((o) => o.kind === "allow_once");
  return { outcome: { outcome: "selected", optionId: allow.optionId } };
});

const out = await app.connectWith(stream, async (ctx) => {
  const init = await ctx.request("initialize", {
    protocolVersion: 1,
    clientInfo: { name: "ts-sdk-test", version: "2.4.0" },
    clientCapabilities: {
      auth: { terminal: true },
      session: { notices: {}, compaction: {}, configOptions: { boolean: {} } },
    },
  });
  const result = await ctx.buildSession(cwd).withAdditionalDirectories([extra]).withSession(async (session) => {
    const promptDone = session.prompt("write in both roots");
    for (;;) {
      const m = await session.nextUpdate();
      if (m.kind === "stop") return { stopReason: m.stopReason, sessionId: session.sessionId };
      seen.updates.push(m.update);
    }
  });
  const logout = await ctx.request("logout", {});
  return { init, result, logout };
});
child.stdin.end();
process.stdout.write(JSON.stringify({ ...out, ...seen }) + "\n");
process.exit(0);
