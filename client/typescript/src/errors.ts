// The SDK's errors: one class per API error code (docs/api.md "Errors").
// An error answer becomes an instance of the class CODES maps its code to;
// a code this SDK does not know yet becomes the class STATUSES maps its
// HTTP status to (else BatonError). Adding a code is one class and one line.

export type Details = Record<string, unknown>;

/** An error answer of the API, or a failure to get one. */
export class BatonError extends Error {
  static readonly defaultCode: string = "";
  /** The API's error code ("fenced", ...). */
  readonly code: string;
  /** The HTTP status; 0 when no node answered. */
  readonly status: number;
  /** The error object's other fields. */
  readonly details: Details;
  /** The answer's X-Baton-Index, when it had one. */
  readonly index: number;

  constructor(message: string, opts: { code?: string; status?: number; details?: Details; index?: number; cause?: unknown } = {}) {
    super(message, opts.cause === undefined ? undefined : { cause: opts.cause });
    this.name = new.target.name;
    this.code = opts.code ?? (new.target).defaultCode;
    this.status = opts.status ?? 0;
    this.details = { ...(opts.details ?? {}) };
    this.index = opts.index ?? 0;
  }

  protected detailNumber(key: string): number | undefined {
    const v = this.details[key];
    return typeof v === "number" ? v : undefined;
  }

  protected detailString(key: string): string | undefined {
    const v = this.details[key];
    return typeof v === "string" ? v : undefined;
  }
}

/** 400: malformed request, bad name or path, missing or out-of-range field. */
export class InvalidArgument extends BatonError {
  static override readonly defaultCode = "invalid_argument";
  /** The failing op of a transaction. */
  get opIndex(): number | undefined {
    return this.detailNumber("op_index");
  }
}
/** 400: content does not hash to its digest (downloads too). */
export class DigestMismatch extends BatonError {
  static override readonly defaultCode = "digest_mismatch";
}
/** 400: a manifest names chunks the tenant does not hold. */
export class MissingChunks extends BatonError {
  static override readonly defaultCode = "missing_chunks";
  get missing(): string[] {
    const v = this.details["missing"];
    return Array.isArray(v) ? v.map(String) : [];
  }
}
/** 401: no token, or an unknown or revoked one. */
export class Unauthenticated extends BatonError {
  static override readonly defaultCode = "unauthenticated";
}
/** 403 forbidden: no grant, another tenant's path, or admin only. */
export class PermissionDenied extends BatonError {
  static override readonly defaultCode = "forbidden";
}
/** 404: no such object or tenant, or an unknown path. */
export class NotFound extends BatonError {
  static override readonly defaultCode = "not_found";
}
/** 405: the path exists, the method does not. */
export class MethodNotAllowed extends BatonError {
  static override readonly defaultCode = "method_not_allowed";
}
/** Base of the 409 errors. */
export class Conflict extends BatonError {}
/** 409: the id exists (with other content). */
export class AlreadyExists extends Conflict {
  static override readonly defaultCode = "already_exists";
}
/** 409: a live lease belongs to someone else. */
export class LeaseHeld extends Conflict {
  static override readonly defaultCode = "lease_held";
  get owner(): string | undefined {
    return this.detailString("owner");
  }
  get leaseUntil(): string | undefined {
    return this.detailString("lease_until");
  }
}
/** 409: the fencing token is not the task's current one. */
export class Fenced extends Conflict {
  static override readonly defaultCode = "fenced";
  get currentToken(): number | undefined {
    return this.detailNumber("current_token");
  }
}
/** 409: an expectation failed; the current value is in the details. */
export class VersionMismatch extends Conflict {
  static override readonly defaultCode = "version_mismatch";
  get currentVersion(): number | undefined {
    return this.detailNumber("current_version");
  }
  get currentStatus(): string | undefined {
    return this.detailString("current_status");
  }
  get currentHead(): string | undefined {
    return this.detailString("current_head");
  }
  get currentState(): string | undefined {
    return this.detailString("current_state");
  }
  get artifactId(): string | undefined {
    return this.detailString("artifact_id");
  }
}
/** 409: an Idempotency-Key or op id reused with another request. */
export class IdempotencyMismatch extends Conflict {
  static override readonly defaultCode = "idempotency_mismatch";
}
/** 409: a retry older than what the cluster remembers, refused rather than applied twice. */
export class IdempotencyExpired extends Conflict {
  static override readonly defaultCode = "idempotency_expired";
  get reason(): string | undefined {
    return this.detailString("reason");
  }
}
/** 409: deleting an artifact version that a ref points at. */
export class Referenced extends Conflict {
  static override readonly defaultCode = "referenced";
  get refs(): string[] {
    const v = this.details["refs"];
    return Array.isArray(v) ? v.map(String) : [];
  }
}
/** 410: a watch resumes from before the retained history. */
export class Compacted extends BatonError {
  static override readonly defaultCode = "compacted";
  get floor(): number | undefined {
    return this.detailNumber("floor");
  }
}
/** 413: a body over its limit. */
export class TooLarge extends BatonError {
  static override readonly defaultCode = "too_large";
}
/** 429: over the principal's request rate or its cap of watches. */
export class RateLimited extends BatonError {
  static override readonly defaultCode = "rate_limited";
}
/** 500: a bug in the server. */
export class Internal extends BatonError {
  static override readonly defaultCode = "internal";
}
/**
 * 503, or no endpoint reachable within the retry budget. Nothing was done,
 * unless it is an UnavailableInDoubt (also an instanceof OutcomeUnknown).
 */
export class Unavailable extends BatonError {
  static override readonly defaultCode = "unavailable";
}
/**
 * 504: a write was proposed but its outcome is not known; it may yet be
 * applied. An UnavailableInDoubt is an instanceof it too.
 */
export class OutcomeUnknown extends BatonError {
  static override readonly defaultCode = "outcome_unknown";
  static override [Symbol.hasInstance](x: unknown): boolean {
    return Function.prototype[Symbol.hasInstance].call(this, x) || (this === OutcomeUnknown && x instanceof UnavailableInDoubt);
  }
}
/**
 * A write whose attempts ran out with no node answering (Unavailable) after
 * an attempt that got no answer (sent, then cut or timed out), so that it
 * may have been applied: an instanceof Unavailable and of OutcomeUnknown.
 */
export class UnavailableInDoubt extends Unavailable {}
/** 507: the write would grow the data past a quota; nothing was applied. */
export class ResourceExhausted extends BatonError {
  static override readonly defaultCode = "resource_exhausted";
}
/** A worker's lease ended without it releasing it (fenced, deleted or expired). Client-side. */
export class LeaseLost extends BatonError {
  static override readonly defaultCode = "lease_lost";
}
/** The lease was given back already (complete, fail or release). Client-side. */
export class LeaseReleased extends BatonError {
  static override readonly defaultCode = "lease_released";
}

/** The task was cancelled while a worker held it: the handler should stop; the worker acknowledges the cancellation. Client-side. */
export class CancelRequested extends BatonError {
  static override readonly defaultCode = "cancel_requested";
}

type ErrorClass = new (message: string, opts?: { code?: string; status?: number; details?: Details; index?: number }) => BatonError;

/** The one table from API codes to classes. */
export const CODES: Readonly<Record<string, ErrorClass>> = {
  invalid_argument: InvalidArgument,
  digest_mismatch: DigestMismatch,
  missing_chunks: MissingChunks,
  unauthenticated: Unauthenticated,
  forbidden: PermissionDenied,
  not_found: NotFound,
  method_not_allowed: MethodNotAllowed,
  already_exists: AlreadyExists,
  lease_held: LeaseHeld,
  fenced: Fenced,
  version_mismatch: VersionMismatch,
  idempotency_mismatch: IdempotencyMismatch,
  idempotency_expired: IdempotencyExpired,
  referenced: Referenced,
  compacted: Compacted,
  too_large: TooLarge,
  rate_limited: RateLimited,
  internal: Internal,
  unavailable: Unavailable,
  outcome_unknown: OutcomeUnknown,
  resource_exhausted: ResourceExhausted,
};

/** Unknown codes: the class of their HTTP status. */
export const STATUSES: Readonly<Record<number, ErrorClass>> = {
  400: InvalidArgument,
  401: Unauthenticated,
  403: PermissionDenied,
  404: NotFound,
  405: MethodNotAllowed,
  409: Conflict,
  410: Compacted,
  413: TooLarge,
  429: RateLimited,
  500: Internal,
  503: Unavailable,
  504: OutcomeUnknown,
  507: ResourceExhausted,
};

/** The error of an answer's body {"error": {"code", "message", ...}}. */
export function errorFromAnswer(status: number, body: string, index = 0): BatonError {
  let obj: unknown;
  try {
    obj = JSON.parse(body);
  } catch {
    obj = undefined;
  }
  const e = (obj as { error?: unknown } | undefined)?.error;
  if (typeof e !== "object" || e === null) {
    const cls = STATUSES[status] ?? BatonError;
    const text = body.trim().slice(0, 200);
    return new cls(text || `http ${status}`, { status, index });
  }
  const { code, message, ...details } = e as Record<string, unknown>;
  const c = typeof code === "string" ? code : "";
  const cls = CODES[c] ?? STATUSES[status] ?? BatonError;
  return new cls(typeof message === "string" ? message : "", { code: c, status, details, index });
}
