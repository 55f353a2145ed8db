# One image for every Perdure process: `perdure gateway|history|scheduler|worker|migrate|keys`.
# Build: docker build -t perdure:0.1.0 .   (user code: deploy/worker.Dockerfile)

# -- build: compile wheels and install them into a virtual environment ------------------------
FROM python:3.11-slim-bookworm AS build
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1 PYTHONDONTWRITEBYTECODE=1
RUN python -m venv /opt/perdure
WORKDIR /src
COPY deploy/constraints.txt deploy/constraints.txt
COPY proto proto
COPY services services
# Exact versions from the constraints file; Perdure's packages from this source tree.
RUN /opt/perdure/bin/pip install --constraint deploy/constraints.txt \
        ./proto ./services/telemetry ./services/common ./services/history \
        ./services/scheduler ./services/gateway ./services/worker ./services/cli

# -- run: the interpreter and the environment, nothing else ---------------------------------
FROM python:3.11-slim-bookworm
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PATH=/opt/perdure/bin:$PATH \
    PERDURE_LOG_FORMAT=json
RUN groupadd --system --gid 10001 perdure \
    && useradd --system --uid 10001 --gid perdure --no-create-home --home-dir /app perdure
COPY --from=build /opt/perdure /opt/perdure
# The example worker's module, so the image runs the demo out of the box.
COPY --chown=root:root examples /app/examples
WORKDIR /app
USER 10001:10001
EXPOSE 7400 7401 7402 7410 7411 7412
ENTRYPOINT ["perdure"]
CMD ["--help"]
