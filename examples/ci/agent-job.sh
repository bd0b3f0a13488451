#!/bin/sh
# ci/agent-job.sh — the job itself, run by `lifeline-mesh ci run`, which has already enrolled
# this runner and pulled the team's lines. Hand $LIFELINE_CONTEXT_FILE to your coding agent
# (e.g. as its system prompt or a file it reads first); what the job records with
# `lifeline log` is signed by this runner and synced back when the job ends.
set -eu
echo "team context: $(wc -c < "$LIFELINE_CONTEXT_FILE") bytes in $LIFELINE_CONTEXT_FILE"
status=0
python -m pytest -q || status=$?
if [ "$status" -eq 0 ]; then
    lifeline log --kind test --agent ci --summary "CI ${CI_COMMIT:-local}: the test suite passes"
else
    lifeline log --kind test --agent ci --summary "CI ${CI_COMMIT:-local}: tests fail (exit $status)"
fi
exit "$status"
