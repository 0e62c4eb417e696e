"""Recorded cgroup trees shared by the cgroup tests."""
