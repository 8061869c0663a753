"""peers.tests.runner: what the tests of the peers share (plain Python: CI
runs them without pytest).

Each test is a module-level function named test_*; it passes by returning,
fails by raising, and is skipped by raising Skip with its reason. run()
calls them in order, prints PASS, FAIL (with the traceback) or SKIP (with
the reason) for each and a count last, removes the test's temporary folder
and returns the exit status: 1 when one failed, else 0.
"""
import shutil
import sys
import traceback


class Skip(Exception):
    """A test that cannot run here; its message says why."""


def run(namespace, tmp, not_imported=None):
    """Runs namespace's test_* functions; `not_imported`: a module that
    importing the code under test must not have loaded (torch), checked
    before the tests run (a test that times PyTorch imports it itself)."""
    passed = failed = skipped = 0
    if not_imported and not_imported in sys.modules:
        failed += 1
        print(f"FAIL importing the code under test imported {not_imported}")
    for name, fn in [(n, f) for n, f in namespace.items() if n.startswith("test_") and callable(f)]:
        try:
            fn()
            passed += 1
            print(f"PASS {name}")
        except Skip as e:
            skipped += 1
            print(f"SKIP {name}: {e}")
        except Exception:
            failed += 1
            print(f"FAIL {name}\n{traceback.format_exc()}")
    shutil.rmtree(tmp, ignore_errors=True)
    print(f"{passed} passed, {failed} failed" + (f", {skipped} skipped" if skipped else ""))
    return 1 if failed else 0
