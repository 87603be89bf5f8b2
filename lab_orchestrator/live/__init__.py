"""`lab top` / `lab web`: one live read of a running lab."""
