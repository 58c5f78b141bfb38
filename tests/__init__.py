"""The test suite: a package, so that its folders (tests/baselines, tests/hadare, ...) are
imported as ``tests.*`` and never shadow the product packages of the same names."""
