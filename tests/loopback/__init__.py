"""Tests that keep every server a test starts on loopback (127.0.0.0/8), and the helpers that check it."""
