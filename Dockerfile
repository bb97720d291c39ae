# Receipts service image.
#   docker build -t receiptsd .
#   docker run --rm -e DATABASE_URL=postgresql://... -p 8080:8080 receiptsd

# ---------------------------------------------------------------- build ----
FROM swift:6.3-bookworm AS build

RUN export DEBIAN_FRONTEND=noninteractive \
    && apt-get update \
    && apt-get install -y --no-install-recommends libpq-dev pkg-config \
    && rm -rf /var/lib/apt/lists/*

WORKDIR /build

# Resolve dependencies first so this layer is cached until the manifest
# changes. Package.* also picks up Package.resolved when it exists.
COPY ./Package.* ./
RUN swift package resolve \
        $([ -f ./Package.resolved ] && echo "--force-resolved-versions" || true)

COPY . .

RUN swift build -c release --product receiptsd --static-swift-stdlib

# Stage the binary (and any SwiftPM resource bundles) for the runtime image. openapi.yaml,
# which the service serves, is embedded in the binary (Package.swift, `.embedInCode`).
RUN mkdir -p /staging \
    && bin_path="$(swift build -c release --show-bin-path)" \
    && cp "$bin_path/receiptsd" /staging/receiptsd \
    && find -L "$bin_path/" -maxdepth 1 -regex '.*\.resources$' -exec cp -Ra {} /staging/ \;

# -------------------------------------------------------------- runtime ----
FROM debian:bookworm-slim

RUN export DEBIAN_FRONTEND=noninteractive \
    && apt-get update \
    && apt-get install -y --no-install-recommends libpq5 ca-certificates tzdata \
    && rm -rf /var/lib/apt/lists/*

RUN useradd --system --user-group --create-home --skel /dev/null \
        --home-dir /app --shell /usr/sbin/nologin receipts

COPY --from=build /staging/ /usr/local/bin/
COPY ./sql /app/sql

ENV RECEIPTS_MIGRATIONS_DIR=/app/sql/migrations \
    RECEIPTS_HOST=0.0.0.0 \
    RECEIPTS_PORT=8080

WORKDIR /app
USER receipts
EXPOSE 8080

ENTRYPOINT ["receiptsd"]
CMD ["serve"]
