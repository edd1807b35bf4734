"""The timeline index: per-track, per-depth lanes of events that answer windowed, level-of-detail queries."""
