"""Coming from lifeline-context 0.6: its ledgers imported, its ``LIFELINE.md`` read and written."""
