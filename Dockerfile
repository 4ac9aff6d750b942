# The image manifests/base/deployment.yaml runs: `docker build -t ghcr.io/optsched/optsched:0.1.0 .`
FROM python:3.11-slim
WORKDIR /app
COPY pyproject.toml README.md ./
COPY optsched ./optsched
RUN pip install --no-cache-dir . && useradd --uid 65532 --no-create-home optsched
USER 65532
ENTRYPOINT ["optsched"]
CMD ["run", "--leader-elect"]
