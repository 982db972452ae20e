// Reads an MCAP file with @mcap/core, the reader Foxglove's app uses, and prints one JSON
// object. Every message is decoded with its channel's schema (decode.mjs); raw channels,
// which have none, are counted.
//   indexed: McapIndexedReader (footer, summary, chunk and message indexes), every message
//            in log-time order: {"chunks", "longestChunk" (seconds from a chunk's first
//            message to its last), "statistics": {messages, chunks, channels},
//            "topics": {topic: {messages, errors, schema}}, "errors", "firstLogTime",
//            "lastLogTime", "transforms": {frame: [x, y, z]} (the last /tf of each frame)}
//   stream:  McapStreamReader front to back, as far as the bytes go (a killed recording
//            has no summary and a cut end): the same, plus "done" (the file's end was read).
// Usage: node mcap_read.mjs indexed|stream FILE.mcap
import { McapIndexedReader, McapStreamReader } from "@mcap/core";
import decompressLz4 from "@foxglove/wasm-lz4";
import { open, readFile } from "node:fs/promises";
import { decoder } from "./decode.mjs";

const [mode, path] = process.argv.slice(2);
await decompressLz4.isLoaded; // (WebAssembly)
const decompressHandlers = { lz4: (data, size) => decompressLz4(data, Number(size)) };
const result = {
  mode, chunks: 0, statistics: null, topics: {}, errors: [], firstLogTime: null,
  lastLogTime: null, transforms: {},
};
const decoders = new Map(); // channel id -> {topic, decode}

function channel(record, schema) {
  let decode = null;
  const entry = (result.topics[record.topic] ??= { messages: 0, errors: 0, schema: schema?.name ?? null });
  try {
    decode = decoder(record.messageEncoding, schema?.name, schema?.encoding, schema?.data ?? new Uint8Array());
  } catch (error) {
    result.errors.push(`${record.topic}: schema: ${error.message}`);
  }
  decoders.set(record.id, { entry, topic: record.topic, decode });
}

function message(record) {
  const found = decoders.get(record.channelId);
  if (!found) {
    result.errors.push(`message on unknown channel ${record.channelId}`);
    return;
  }
  const time = Number(record.logTime) / 1e9;
  result.firstLogTime = result.firstLogTime === null ? time : Math.min(result.firstLogTime, time);
  result.lastLogTime = result.lastLogTime === null ? time : Math.max(result.lastLogTime, time);
  found.entry.messages += 1;
  if (!found.decode) return;
  try {
    const value = found.decode(record.data);
    if (found.topic === "/tf") {
      for (const t of value.transforms) {
        result.transforms[t.childFrameId] = [t.translation.x, t.translation.y, t.translation.z];
      }
    }
  } catch (error) {
    found.entry.errors += 1;
    if (result.errors.length < 20) result.errors.push(`${found.topic}: ${error.message}`);
  }
}

async function indexed() {
  const file = await open(path, "r");
  const readable = {
    size: async () => BigInt((await file.stat()).size),
    read: async (offset, size) => {
      const buffer = new Uint8Array(Number(size));
      await file.read(buffer, 0, Number(size), Number(offset));
      return buffer;
    },
  };
  const reader = await McapIndexedReader.Initialize({ readable, decompressHandlers });
  result.chunks = reader.chunkIndexes.length;
  result.longestChunk = Math.max(
    0, ...reader.chunkIndexes.map((c) => Number(c.messageEndTime - c.messageStartTime) / 1e9),
  );
  const stats = reader.statistics;
  result.statistics = stats && {
    messages: Number(stats.messageCount), chunks: stats.chunkCount, channels: stats.channelCount,
  };
  for (const record of reader.channelsById.values()) channel(record, reader.schemasById.get(record.schemaId));
  for await (const record of reader.readMessages()) message(record);
  await file.close();
}

async function stream() {
  const reader = new McapStreamReader({ decompressHandlers, includeChunks: true });
  reader.append(await readFile(path));
  const schemas = new Map();
  try {
    for (let record; (record = reader.nextRecord()); ) {
      if (record.type === "Schema") schemas.set(record.id, record);
      else if (record.type === "Channel" && !decoders.has(record.id)) channel(record, schemas.get(record.schemaId));
      else if (record.type === "Message") message(record);
      else if (record.type === "Chunk") result.chunks += 1;
    }
  } catch (error) {
    result.errors.push(`read: ${error.message}`);
  }
  result.done = reader.done();
  result.bytesLeft = reader.bytesRemaining();
}

try {
  await (mode === "indexed" ? indexed() : stream());
} catch (error) {
  result.errors.push(`read: ${error.message}`);
}
process.stdout.write(JSON.stringify(result) + "\n");
