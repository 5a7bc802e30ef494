"""Tests of the SSH transport against a fleet of real OpenSSH servers on loopback."""
