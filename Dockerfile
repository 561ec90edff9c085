# Strata's container image: stratad and strata on Debian 12.
#
#   docker build -t strata .                      # from debian:bookworm-slim
#   deploy/image/build.sh                         # the same where no registry
#                                                 # answers (a debootstrap base)
#
# Two stages: the first builds with CMake as scripts/run.sh does (the
# packages come from scripts/deps.sh, so the image and a developer's
# machine build with the same ones) and lists the Debian packages the two
# binaries link against; the second installs only those, kcat (the health
# check's client) and curl, and runs stratad as the unprivileged user
# strata (uid 10001) with its data in /var/lib/strata.  Settings come from
# STRATA_* environment variables or a mounted properties file: see
# deploy/image/README.md.

ARG BASE_IMAGE=debian:bookworm-slim

FROM ${BASE_IMAGE} AS build
ARG JOBS=2
ENV DEBIAN_FRONTEND=noninteractive
WORKDIR /src
COPY scripts/deps.sh scripts/deps.sh
RUN scripts/deps.sh run && rm -rf /var/lib/apt/lists/*
COPY . .
RUN cmake -S . -B /build -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSTRATA_TESTS=OFF >/dev/null \
 && cmake --build /build -j"${JOBS}" --target stratad strata \
 && mkdir -p /out \
 && objcopy --strip-debug /build/bin/stratad /out/stratad \
 && objcopy --strip-debug /build/bin/strata /out/strata \
 && deploy/image/runtime-packages.sh /out/stratad /out/strata >/out/runtime-packages \
 && echo "runtime packages: $(tr '\n' ' ' </out/runtime-packages)"

FROM ${BASE_IMAGE}
ENV DEBIAN_FRONTEND=noninteractive
COPY --from=build /out/runtime-packages /tmp/runtime-packages
RUN apt-get update -qq \
 && xargs -a /tmp/runtime-packages apt-get install -y -qq --no-install-recommends \
      ca-certificates kcat curl >/dev/null \
 && rm -rf /var/lib/apt/lists/* /tmp/runtime-packages \
 && groupadd --system --gid 10001 strata \
 && useradd --system --uid 10001 --gid strata --home-dir /var/lib/strata --no-create-home \
      --shell /usr/sbin/nologin strata \
 && mkdir -p /var/lib/strata /run/strata /etc/strata \
 && chown strata:strata /var/lib/strata /run/strata
COPY --from=build /out/stratad /out/strata /usr/local/bin/
COPY deploy/image/entrypoint.sh /usr/local/bin/strata-entrypoint
COPY deploy/image/healthcheck.sh /usr/local/bin/strata-healthcheck
COPY config/ /usr/share/strata/config/
LABEL org.opencontainers.image.title="Strata" \
      org.opencontainers.image.description="A Kafka-protocol streaming service with tiered storage to S3"
USER 10001:10001
WORKDIR /var/lib/strata
VOLUME /var/lib/strata
# Kafka clients, the controller quorum, the admin HTTP listener
EXPOSE 9092 9093 9644
HEALTHCHECK --interval=10s --timeout=10s --start-period=30s --retries=3 CMD ["strata-healthcheck"]
ENTRYPOINT ["strata-entrypoint"]
CMD ["stratad"]
