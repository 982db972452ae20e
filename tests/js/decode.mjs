// Decoding a channel's messages with the schema its server or file gave it, and nothing else:
// protobuf through protobufjs from the schema's FileDescriptorSet, JSON with JSON.parse checked
// against the channel's JSON schema (ajv). Shared by foxglove_client.mjs and mcap_read.mjs.
import Ajv from "ajv";
import protobuf from "protobufjs";
import descriptor from "protobufjs/ext/descriptor/index.js";

const ajv = new Ajv({ allErrors: true, strict: false });
const text = new TextDecoder("utf-8", { fatal: true });

/** A function decoding one message of a channel, or throwing with the reason it cannot. */
export function decoder(encoding, schemaName, schemaEncoding, schemaData) {
  if (encoding === "protobuf") {
    if (schemaEncoding !== "protobuf") throw new Error(`protobuf channel with ${schemaEncoding} schema`);
    const root = protobuf.Root.fromDescriptor(descriptor.FileDescriptorSet.decode(schemaData));
    const type = root.lookupType(schemaName);
    return (data) => type.toObject(type.decode(data), { longs: Number, defaults: true });
  }
  if (encoding === "json") {
    let check = null;
    if (schemaEncoding === "jsonschema") check = ajv.compile(JSON.parse(text.decode(schemaData)));
    else if (schemaEncoding) throw new Error(`json channel with ${schemaEncoding} schema`);
    return (data) => {
      const value = JSON.parse(text.decode(data));
      if (check && !check(value)) throw new Error(`not ${schemaName}: ${ajv.errorsText(check.errors)}`);
      return value;
    };
  }
  return null; // no schema to decode with (robowire's raw protocol bytes): counted, not decoded
}
