/** Idempotent: every instance runs it at start-up against the same file. */
export const SCHEMA = `
CREATE TABLE IF NOT EXISTS campaigns (
  id          TEXT PRIMARY KEY,
  stock       INTEGER NOT NULL,
  issued      INTEGER NOT NULL DEFAULT 0,
  -- Highest fencing token that wrote this row; a fenced write with a lower one is refused.
  last_fence  INTEGER NOT NULL DEFAULT 0
);

CREATE TABLE IF NOT EXISTS coupons (
  id            INTEGER PRIMARY KEY AUTOINCREMENT,
  campaign_id   TEXT NOT NULL REFERENCES campaigns(id),
  user_id       TEXT NOT NULL,
  code          TEXT NOT NULL,
  instance      TEXT NOT NULL,
  fence         INTEGER,
  issued_at     INTEGER NOT NULL,
  settled_tick  INTEGER
);
-- Deliberately NOT unique on (campaign_id, user_id): a real schema should add that constraint, but
-- then the demo could not show what the lock alone guarantees (and what an in-process lock does not).
CREATE INDEX IF NOT EXISTS coupons_by_user ON coupons (campaign_id, user_id);
CREATE INDEX IF NOT EXISTS coupons_unsettled ON coupons (settled_tick) WHERE settled_tick IS NULL;

-- Writes refused by the fence: a claim whose lease had expired before it wrote.
CREATE TABLE IF NOT EXISTS fence_rejections (
  campaign_id  TEXT NOT NULL,
  instance     TEXT NOT NULL,
  fence        INTEGER NOT NULL,
  last_fence   INTEGER NOT NULL,
  at           INTEGER NOT NULL
);

-- One row per run of the settlement job: which instance ran which cron tick.
CREATE TABLE IF NOT EXISTS settlements (
  tick      INTEGER NOT NULL,
  instance  TEXT NOT NULL,
  coupons   INTEGER NOT NULL,
  ran_at    INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS settlements_by_tick ON settlements (tick);
`;
