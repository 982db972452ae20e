// Foxglove's own client, @foxglove/ws-protocol's FoxgloveClient, on the `ws` WebSocket,
// offering exactly one subprotocol. It subscribes to every channel the server advertises and
// decodes each message with the schema advertised for it, until every channel has COUNT
// messages (or SECONDS pass), then prints one JSON object. COUNT is a number, optionally
// followed by per-topic numbers: "1,/location=6" (one message of each, six of /location):
//   {"subprotocol", "server", "complete", "channels": [{topic, encoding, schemaName,
//    schemaEncoding, messages, errors}], "errors": [...], "decoded": {topic: [objects]}}
// Usage: node foxglove_client.mjs ws://127.0.0.1:8765 foxglove.websocket.v1 [COUNT] [SECONDS]
import wsProtocol from "@foxglove/ws-protocol";
import WebSocket from "ws";
import { decoder } from "./decode.mjs";

const { FoxgloveClient } = wsProtocol; // a CommonJS package

const [url, subprotocol, count = "1", seconds = "30"] = process.argv.slice(2);
const [fallback, ...perTopic] = count.split(",");
const wants = new Map(perTopic.map((pair) => [pair.slice(0, pair.lastIndexOf("=")), Number(pair.slice(pair.lastIndexOf("=") + 1))]));
const want = (topic) => wants.get(topic) ?? Number(fallback);
const ws = new WebSocket(url, [subprotocol]);
const client = new FoxgloveClient({ ws });
const result = { subprotocol: null, server: null, complete: false, channels: [], errors: [], decoded: {} };
const bySubscription = new Map();

function finish(code) {
  result.complete = result.channels.length > 0 && result.channels.every((c) => c.messages >= want(c.topic));
  process.stdout.write(JSON.stringify(result) + "\n");
  ws.terminate();
  process.exit(code);
}

client.on("open", () => { result.subprotocol = ws.protocol; });
client.on("serverInfo", (info) => { result.server = info.name; });
client.on("error", (error) => {
  result.errors.push(String(error?.message ?? error));
  if (ws.readyState !== WebSocket.OPEN) finish(1); // the handshake failed: nothing more comes
});
client.on("close", () => finish(1));
client.on("advertise", (channels) => {
  for (const channel of channels) {
    const entry = {
      topic: channel.topic, encoding: channel.encoding, schemaName: channel.schemaName,
      schemaEncoding: channel.schemaEncoding ?? null, messages: 0, errors: 0,
    };
    result.channels.push(entry);
    result.decoded[channel.topic] = [];
    let decode = null;
    try {
      const data = channel.schemaEncoding === "protobuf"
        ? Buffer.from(channel.schema, "base64") : Buffer.from(channel.schema, "utf-8");
      decode = decoder(channel.encoding, channel.schemaName, channel.schemaEncoding, data);
    } catch (error) {
      entry.errors += 1;
      result.errors.push(`${channel.topic}: schema: ${error.message}`);
    }
    bySubscription.set(client.subscribe(channel.id), { entry, decode });
  }
});
client.on("message", ({ subscriptionId, data }) => {
  const found = bySubscription.get(subscriptionId);
  if (!found) return;
  const { entry, decode } = found;
  entry.messages += 1;
  try {
    if (!decode) throw new Error("no decoder");
    result.decoded[entry.topic].push(decode(new Uint8Array(data.buffer, data.byteOffset, data.byteLength)));
  } catch (error) {
    entry.errors += 1;
    result.errors.push(`${entry.topic}: ${error.message}`);
  }
  if (result.channels.every((c) => c.messages >= want(c.topic))) finish(0);
});
setTimeout(() => finish(1), Number(seconds) * 1000);
