"""logincount, in Python: counts each user's logins and closes the session after
config.idle_timeout of processing time without logins (the running example of Spark's
applyInPandasWithState). Behaves exactly like samples/logincount/go.

Build: groupstate build --lang python logincount.py (the conformance test builds it the same
way, with internal/pybuild).
"""
import groupstate

# config.idle_timeout ("10s" or milliseconds); None (or not positive) means no timeout.
idle_timeout_ms = groupstate.config_duration_ms("idle_timeout")


def handle(key, rows, state):
    count = state.getOption["login_count"] if state.exists else 0
    if state.hasTimedOut:
        state.remove()
        yield {"user_id": key[0], "total_logins": count, "session_closed": True}
        return
    count += sum(len(chunk) for chunk in rows)
    state.update({"login_count": count})
    yield {"user_id": key[0], "total_logins": count}
    if idle_timeout_ms is not None and idle_timeout_ms > 0:
        state.setTimeoutDuration(idle_timeout_ms)
