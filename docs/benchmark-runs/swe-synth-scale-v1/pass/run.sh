#!/bin/bash
# The re-validation under grader c497d626 (rounds 20-21, revalidation.json): markdown 3.6 first, the package whose
# false alarm the change fixes (its own set, not the scale set's: the plan's extension stopped at click), then the
# scale set, every row validated again (markdown only while its report is not committed). Resumable: rerun it; a
# row of the same record and grader is kept.
#   WORKERS=2 nohup setsid bash docs/benchmark-runs/swe-synth-scale-v1/pass/run.sh &
cd "$(dirname "$0")/../../../.."
export HF_HUB_OFFLINE=1 PYTHONHASHSEED=0 TZ=UTC
mkdir -p /tmp/val
if [ ! -f docs/benchmark-runs/swe-synth-scale-v1/markdown-3.6-c497d626/report.json ]; then  # done once is enough
  echo "start markdown workers=${WORKERS:-1} commit=$(git rev-parse --short HEAD) $(date -u +%FT%T)" >> /tmp/val/status
  nice -n 15 .venv/bin/turngym swe synth markdown==3.6 --max-candidates 100 --workers ${WORKERS:-1} \
      --out ~/.cache/turngym/swe-synth/sets/markdown-3.6 >> /tmp/val/log 2>&1
  echo "end markdown rc=$? $(date -u +%FT%T)" >> /tmp/val/status
fi
echo "start scale-v1 workers=${WORKERS:-1} $(date -u +%FT%T)" >> /tmp/val/status
nice -n 15 .venv/bin/turngym swe synth --packages-file recipes/configs/swe-synth-packages.txt --max-candidates 100 \
    --workers ${WORKERS:-1} --eval-repos boltons,idna,pyparsing --test-repos isodate,packaging,sqlparse \
    --out ~/.cache/turngym/swe-synth/sets/scale-v1 >> /tmp/val/log 2>&1
echo "end scale-v1 rc=$? $(date -u +%FT%T)" >> /tmp/val/status
