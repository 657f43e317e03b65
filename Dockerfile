# The sdkbox image: `docker run -i --rm sdkbox` is the stdio server on the bundled demo API;
# `docker run -p 8080:8080 -e SDKBOX_TOKEN ... sdkbox serve --http 0.0.0.0:8080 --token-env
# SDKBOX_TOKEN ...` the remote one. Both stages are Debian bookworm; the build args let
# scripts/container-test build on a base made locally with debootstrap, where no registry
# image can be pulled.
ARG BUILDER_IMAGE=docker.io/library/rust:1-slim-bookworm
ARG RUNTIME_IMAGE=docker.io/library/debian:bookworm-slim

FROM ${BUILDER_IMAGE} AS build
# The JavaScript engine (QuickJS behind deno_core) builds with CMake and Debian's SIMDe headers.
RUN apt-get update \
 && apt-get install -y --no-install-recommends cmake libsimde-dev g++ make ca-certificates \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
# Behind a TLS-inspecting proxy, point cargo at a CA bundle mounted into the build
# (`--build-arg CARGO_HTTP_CAINFO=/path`); unset, cargo uses the system's roots.
ARG CARGO_HTTP_CAINFO
# The caches keep crates and incremental artefacts between builds on one machine; the binary
# is copied out of the cached target directory in the same step, without its debug sections
# (line tables included: about 80% of the file).
RUN --mount=type=cache,id=sdkbox-cargo-registry,target=/usr/local/cargo/registry \
    --mount=type=cache,id=sdkbox-target,target=/src/target \
    cargo build --release --locked --bin sdkbox \
 && install -D -m 0755 target/release/sdkbox /out/sdkbox \
 && strip --strip-debug /out/sdkbox
# The type check's compiler (TypeScript 7's native tsc, the npm package sdkbox pins, checked
# against its digest), so a container checks scripts without downloading anything. Behind a
# TLS-inspecting proxy the bundle cargo was given is sdkbox's too (SSL_CERT_FILE).
RUN if [ -n "${CARGO_HTTP_CAINFO:-}" ]; then export SSL_CERT_FILE="$CARGO_HTTP_CAINFO"; fi \
 && /out/sdkbox fetch-tsc --into /out/typescript

FROM ${RUNTIME_IMAGE}
# ca-certificates: the provider's TLS roots (reqwest verifies against the system's store).
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates \
 && apt-get clean && rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin \
 && useradd --uid 10001 --user-group --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin sdkbox \
 && install -d -o 10001 -g 10001 /var/cache/sdkbox
COPY --from=build /out/sdkbox /usr/local/bin/sdkbox
COPY --from=build /out/typescript /usr/local/lib/sdkbox/typescript
ENV SDKBOX_TSC=/usr/local/lib/sdkbox/typescript/tsc
COPY examples /usr/share/sdkbox/examples
# A spec fetched by URL is cached here (mount a volume to keep it across containers).
ENV SDKBOX_CACHE_DIR=/var/cache/sdkbox
USER 10001:10001
EXPOSE 8080
ENTRYPOINT ["sdkbox"]
CMD ["serve", "--demo"]
