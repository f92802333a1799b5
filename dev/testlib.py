"""
dev/testlib.py — what the Python tests of dev/ share (as dev/testlib.h and dev/testlib.sh do for C and shell):
check(ok, what) prints "ok   <what>" or "FAIL <what>", counts it and returns ok; end() prints the closing
"N passed, M failed" line and returns the exit status (1 on any failure). Module state: the two counts.
"""
passed, failed = 0, 0


def check(ok, what):
    global passed, failed
    print(f"{'ok  ' if ok else 'FAIL'} {what}")
    if ok:
        passed += 1
    else:
        failed += 1
    return ok


def end():
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0
