// Logging through the host (groupstate.log): messages carry the deployment and the key.

/** log/slog levels. */
export enum LogLevel {
  DEBUG = -4,
  INFO = 0,
  WARN = 4,
  ERROR = 8,
}

@external("groupstate", "log")
declare function host_log(level: i32, ptr: usize, len: usize): void;

/** Writes `message` to the host's log at `level`, tagged with the deployment and the key of
 *  the current group. Messages over 16 KiB are truncated by the host. */
export function log(level: LogLevel, message: string): void {
  const b = String.UTF8.encode(message, false, String.UTF8.ErrorMode.REPLACE);
  host_log(level, changetype<usize>(b), <usize>b.byteLength);
}
