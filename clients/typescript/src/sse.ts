// A Server-Sent Events decoder (the WHATWG event-stream format) over a byte stream: what `askStream` reads.
// `EventSource` cannot POST or send a key, so the answer tier's stream is read from a `fetch` body instead.

/** One dispatched event: its type (`message` when unnamed), its data lines joined by `\n`, its id. */
export interface SseEvent {
  event: string;
  data: string;
  id: string | undefined;
}

/** Feed it lines (without their line break); it returns an event at each blank line that ends one. */
export class SseDecoder {
  private event = "";
  private data: string[] = [];
  private id: string | undefined;

  feed(line: string): SseEvent | undefined {
    if (line === "") {
      if (this.data.length === 0 && this.event === "") return undefined;
      const event: SseEvent = { event: this.event || "message", data: this.data.join("\n"), id: this.id };
      this.event = "";
      this.data = [];
      return event;
    }
    if (line.startsWith(":")) return undefined; // a comment (keep-alive)
    const colon = line.indexOf(":");
    const name = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? "" : line.slice(colon + 1);
    if (value.startsWith(" ")) value = value.slice(1);
    if (name === "event") this.event = value;
    else if (name === "data") this.data.push(value);
    else if (name === "id" && !value.includes("\0")) this.id = value;
    return undefined;
  }
}

/** The lines of a UTF-8 byte stream, split at `\n`, `\r\n` or `\r` (a break split across chunks included). */
export async function* lines(body: AsyncIterable<Uint8Array>): AsyncGenerator<string> {
  const decoder = new TextDecoder("utf-8");
  let buffer = "";
  let lastWasCR = false;
  const split = function* (text: string, final: boolean): Generator<string> {
    buffer += text;
    let start = 0;
    for (let i = 0; i < buffer.length; i++) {
      const ch = buffer.charCodeAt(i);
      if (ch === 10 /* \n */) {
        if (lastWasCR && i === start) {
          // the \n of a \r\n whose \r ended the previous line
          start = i + 1;
          lastWasCR = false;
          continue;
        }
        yield buffer.slice(start, i);
        start = i + 1;
        lastWasCR = false;
      } else if (ch === 13 /* \r */) {
        yield buffer.slice(start, i);
        start = i + 1;
        lastWasCR = true;
      } else {
        lastWasCR = false;
      }
    }
    buffer = buffer.slice(start);
    if (final && buffer !== "") {
      yield buffer;
      buffer = "";
    }
  };
  for await (const chunk of body) yield* split(decoder.decode(chunk, { stream: true }), false);
  yield* split(decoder.decode(), true);
}

/** The events of a byte stream; an event cut off by the end of the stream is not dispatched. */
export async function* sseEvents(body: AsyncIterable<Uint8Array>): AsyncGenerator<SseEvent> {
  const decoder = new SseDecoder();
  let first = true;
  for await (let line of lines(body)) {
    if (first) {
      if (line.startsWith("\uFEFF")) line = line.slice(1); // a byte-order mark
      first = false;
    }
    const event = decoder.feed(line);
    if (event) yield event;
  }
}
