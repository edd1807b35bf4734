"""Test package: unique module names across suites (tests)."""
