/**
 * Redis Cluster's slot of a name (`keyHashSlot` in cluster.c): CRC16-XMODEM of the text between the
 * first `{` and the next `}` when that is not empty, else of the whole name, modulo 16384. Used only
 * on a Cluster with sharded pub/sub, to name the wake channel of a lock's slot (see wake-route.ts).
 */
export const CLUSTER_SLOTS = 16_384;

const CRC16_TABLE = (() => {
  const table = new Uint16Array(256);
  for (let i = 0; i < 256; i++) {
    let crc = i << 8;
    for (let bit = 0; bit < 8; bit++) crc = crc & 0x8000 ? ((crc << 1) ^ 0x1021) & 0xffff : (crc << 1) & 0xffff;
    table[i] = crc;
  }
  return table;
})();

function crc16(bytes: Uint8Array, from: number, to: number): number {
  let crc = 0;
  for (let i = from; i < to; i++) crc = ((crc << 8) & 0xffff) ^ CRC16_TABLE[((crc >> 8) ^ bytes[i]) & 0xff];
  return crc;
}

/** The slot Redis puts `name` in (sent as UTF-8). */
export function keySlot(name: string): number {
  const bytes = Buffer.from(name, 'utf8');
  const open = bytes.indexOf(0x7b);
  if (open >= 0) {
    const close = bytes.indexOf(0x7d, open + 1);
    if (close > open + 1) return crc16(bytes, open + 1, close) & (CLUSTER_SLOTS - 1);
  }
  return crc16(bytes, 0, bytes.length) & (CLUSTER_SLOTS - 1);
}

let slotTags: string[] | undefined;

/** Characters of a slot tag: never a brace, nothing a log or a URL would escape. */
const TAG_ALPHABET = '0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ-_';

/**
 * A short text whose slot is `slot`: the first of the 1–3 character strings over TAG_ALPHABET (in
 * order of length, then alphabet) that hashes there. The table of all 16384 is built once, on first
 * use, with the CRC carried from each prefix to its extensions (266 000 table steps, a few ms).
 */
export function slotTag(slot: number): string {
  slotTags ??= buildSlotTags();
  return slotTags[slot];
}

function buildSlotTags(): string[] {
  const tags = new Array<string>(CLUSTER_SLOTS);
  const codes = Array.from(TAG_ALPHABET, (ch) => ch.charCodeAt(0));
  const n = codes.length;
  const step = (crc: number, byte: number) => ((crc << 8) & 0xffff) ^ CRC16_TABLE[((crc >> 8) ^ byte) & 0xff];
  const take = (crc: number, tag: string) => {
    if (tags[crc & (CLUSTER_SLOTS - 1)] === undefined) tags[crc & (CLUSTER_SLOTS - 1)] = tag;
  };
  for (let a = 0; a < n; a++) take(step(0, codes[a]), TAG_ALPHABET[a]);
  for (let a = 0; a < n; a++) {
    const crcA = step(0, codes[a]);
    for (let b = 0; b < n; b++) take(step(crcA, codes[b]), TAG_ALPHABET[a] + TAG_ALPHABET[b]);
  }
  for (let a = 0; a < n; a++) {
    const crcA = step(0, codes[a]);
    for (let b = 0; b < n; b++) {
      const crcB = step(crcA, codes[b]);
      for (let c = 0; c < n; c++) {
        const crc = step(crcB, codes[c]);
        if (tags[crc & (CLUSTER_SLOTS - 1)] === undefined) tags[crc & (CLUSTER_SLOTS - 1)] = TAG_ALPHABET[a] + TAG_ALPHABET[b] + TAG_ALPHABET[c];
      }
    }
  }
  for (let s = 0; s < CLUSTER_SLOTS; s++) if (tags[s] === undefined) throw new Error(`no slot tag for slot ${s}`);
  return tags;
}
