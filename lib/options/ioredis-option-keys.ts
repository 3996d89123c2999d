/**
 * Every option ioredis reads from an options object (`RedisOptions`: its own, the standalone connection's and the
 * Sentinel connector's), so a near miss of one (`prot`, `Port`) is refused rather than ignored by ioredis
 * (connection-option.ts). Kept equal to the type by test/types/ioredis-option-keys.check.ts: an ioredis upgrade that
 * adds or renames an option fails the type check until this list follows.
 */
export const IOREDIS_OPTION_KEYS = [
  // where the server is (StandaloneConnectionOptions)
  'host',
  'port',
  'family',
  'path',
  'tls',
  'disconnectTimeout',
  // CommonRedisOptions, with CommanderOptions
  'Connector',
  'retryStrategy',
  'commandTimeout',
  'blockingTimeout',
  'blockingTimeoutGrace',
  'socketTimeout',
  'keepAlive',
  'noDelay',
  'connectionName',
  'disableClientInfo',
  'clientInfoTag',
  'username',
  'password',
  'db',
  'autoResubscribe',
  'autoResendUnfulfilledCommands',
  'reconnectOnError',
  'readOnly',
  'stringNumbers',
  'connectTimeout',
  'monitor',
  'maxRetriesPerRequest',
  'maxLoadingRetryTime',
  'enableAutoPipelining',
  'autoPipeliningIgnoredCommands',
  'offlineQueue',
  'commandQueue',
  'enableOfflineQueue',
  'enableReadyCheck',
  'lazyConnect',
  'scripts',
  'keyPrefix',
  'showFriendlyErrorStack',
  // a primary found through Sentinels (SentinelConnectionOptions)
  'sentinels',
  'name',
  'role',
  'sentinelUsername',
  'sentinelPassword',
  'sentinelRetryStrategy',
  'sentinelReconnectStrategy',
  'preferredSlaves',
  'sentinelCommandTimeout',
  'enableTLSForSentinelMode',
  'sentinelTLS',
  'natMap',
  'updateSentinels',
  'sentinelMaxConnections',
  'failoverDetector',
] as const;

/** What ioredis reads from each entry of `sentinels` (`SentinelAddress`); the same type test keeps it equal. */
export const SENTINEL_ADDRESS_KEYS = ['host', 'port', 'family'] as const;
