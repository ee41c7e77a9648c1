# A per-task image, as SWE-bench ships them: the default sandbox image with one repository baked
# in at /testbed. Built by envs.swe.sandbox.docker.build_image(tag, repo_dir=...).
ARG BASE=turngym/swe-python:bookworm
FROM ${BASE}
COPY --chown=65534:65534 repo/ /testbed/
