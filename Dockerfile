# One image for every service: `pressroom gateway|renderer|projector|notifier|conductor`
# (docs/deploy.md, "Building the image"). Build it with `make image`
# (scripts/build-image.sh), which first downloads the wheels of every release pinned in
# requirements/image.txt (checked against the lock's sha256) and builds the project's
# own wheel on the host: the image installs exactly the lock, with --require-hashes and no
# index, and compiles nothing, so no build tool reaches either stage.
#
# BASE is Debian bookworm, pinned by digest: Docker Hub's debian:bookworm-slim by default
# (move the digest on with each of its releases: docs/deploy.md). Where no registry can be
# reached, scripts/build-image.sh makes a base from Debian's packages with mmdebstrap and
# passes it here pinned by the digest podman gave it on import.
ARG BASE=docker.io/library/debian:bookworm-slim@sha256:3783cc01769c7b2b1b83a5c5ad96c815348e28ed7da68e2e3687004faa906251

FROM ${BASE} AS build
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends python3 python3-venv \
    && rm -rf /var/lib/apt/lists/*
COPY build/wheels/ /wheels/
COPY build/built/ /built/
COPY build/project/ /project/
# The lock, every file checked against its sha256 (build/wheels/requirements.txt: the
# lock less the few pure-Python releases published only as source, whose source the host
# checked against the lock and built into /built); then those; then the project alone;
# then pip's own check that they agree. pip and setuptools (the venv's own) leave with it:
# the environment holds the lock and the project, nothing else.
RUN python3 -m venv /opt/pressroom \
    && /opt/pressroom/bin/pip install --no-cache-dir --no-index --find-links /wheels \
        --require-hashes --requirement /wheels/requirements.txt \
    && if ls /built/*.whl >/dev/null 2>&1; then \
        /opt/pressroom/bin/pip install --no-cache-dir --no-index --no-deps /built/*.whl; fi \
    && /opt/pressroom/bin/pip install --no-cache-dir --no-index --no-deps /project/*.whl \
    && /opt/pressroom/bin/pip check \
    && /opt/pressroom/bin/pip uninstall --yes pip setuptools \
    && find /opt/pressroom -name __pycache__ -prune -exec rm -rf {} +

FROM ${BASE}
# Debian's stable packages, updated for security by Debian: not pinned (DL3008).
# chromium-headless-shell: Chromium's headless-only build, about half the CPU per PDF of
# the full browser (docs/benchmarks.md); the renderer needs nothing else of Chromium.
# tini is PID 1: it forwards SIGTERM to the service and reaps what Chromium leaves.
# The Noto fonts print every common script as text (Greek, Cyrillic, CJK, Arabic, Hebrew,
# Devanagari, colour emoji): about 145 MB installed (core 43, CJK 91, emoji 11).
# icc-profiles-free: sRGB.icc, the output intent of PDF/A files (options.pdfa, facturx).
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends \
        python3 chromium-headless-shell fonts-dejavu-core fonts-liberation ca-certificates tini \
        fonts-noto-core fonts-noto-cjk fonts-noto-color-emoji \
        icc-profiles-free \
    && rm -rf /var/lib/apt/lists/* /var/cache/apt/* /var/log/apt /var/log/dpkg.log \
        /usr/share/man /usr/share/info \
    && find /usr/share/doc -type f ! -name copyright -delete \
    && echo "pressroom:x:10001:10001:Pressroom:/tmp:/usr/sbin/nologin" >> /etc/passwd \
    && echo "pressroom:x:10001:" >> /etc/group
COPY --from=build /opt/pressroom /opt/pressroom
ENV PATH=/opt/pressroom/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PRESSROOM_HOST=0.0.0.0 \
    PRESSROOM_CHROMIUM=/usr/lib/chromium/chromium-headless-shell
# A numeric user, so Kubernetes' runAsNonRoot can verify it; the root filesystem may be
# read-only: everything writes under /tmp.
USER 10001:10001
WORKDIR /tmp
EXPOSE 8080 9100
ENTRYPOINT ["/usr/bin/tini", "--", "pressroom"]
CMD ["gateway"]
