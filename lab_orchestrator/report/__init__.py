"""`lab report`: test plans, the run, the report document, topology pictures."""
