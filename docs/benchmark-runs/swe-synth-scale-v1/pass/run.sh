#!/bin/bash
# The 12 packages not yet re-validated under the current grader first (their rows land in the shared cache), then
# the whole list's set with its splits (every row cached by then).
cd "$(dirname "$0")/../../../.."
export HF_HUB_OFFLINE=1 PYTHONHASHSEED=0 TZ=UTC
echo "start rest workers=${WORKERS:-1} commit=$COMMIT $(date -u +%FT%T)" >> /tmp/val/status
nice -n 19 .venv/bin/turngym swe synth cachetools==5.3.3 inflection==0.5.1 isodate==0.6.1 more-itertools==10.2.0 parse==1.20.1 toolz==0.12.1 python-dateutil==2.9.0.post0 pyparsing==3.1.2 boltons==24.0.0 idna==3.7 semver==3.0.2 jmespath==1.0.1 --max-candidates 100 --workers ${WORKERS:-1} --out ~/.cache/turngym/swe-synth/sets/scale-v1-rest >> /tmp/val/log 2>&1
echo "end rest rc=$? $(date -u +%FT%T)" >> /tmp/val/status
echo "start phase2 workers=${WORKERS:-1} commit=$COMMIT $(date -u +%FT%T)" >> /tmp/val/status
nice -n 19 .venv/bin/turngym swe synth --packages-file recipes/configs/swe-synth-packages.txt --max-candidates 100 --workers ${WORKERS:-1} --eval-repos boltons,idna,pyparsing --test-repos isodate,packaging,sqlparse --out ~/.cache/turngym/swe-synth/sets/scale-v1 >> /tmp/val/log 2>&1
echo "end phase2 rc=$? $(date -u +%FT%T)" >> /tmp/val/status
