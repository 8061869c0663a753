"""The peers' tests: each test_*.py runs as a script (CTest runs them,
tests/CMakeLists.txt), `python3 bench/peers/tests/test_NAME.py [bench]`."""
