# A worker image for your own workflows: Perdure's image plus your code and its packages.
# Build from your project's directory:
#   docker build -f worker.Dockerfile --build-arg PERDURE_IMAGE=ghcr.io/perdure/perdure:0.1.0 .
# Run: the container runs `perdure worker --module $WORKER_MODULE` (its key from PERDURE_API_KEY).
ARG PERDURE_IMAGE=ghcr.io/perdure/perdure:0.1.0
FROM ${PERDURE_IMAGE}
ENV PYTHONDONTWRITEBYTECODE=1 WORKER_MODULE=workflows
USER root
COPY requirements.txt /app/requirements.txt
RUN pip install --no-cache-dir --requirement /app/requirements.txt
COPY . /app
USER 10001:10001
ENTRYPOINT ["sh", "-c", "exec perdure worker --module \"$WORKER_MODULE\" \"$@\"", "--"]
