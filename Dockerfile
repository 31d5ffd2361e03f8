# usersd in a container: a static binary on a base image with nothing else in it (no shell, no
# package manager), run as a user without privileges, its SQLite file on a volume.
#
#   docker build --build-arg VERSION=v1.0.0 -t usersd .
#   docker run -p 8080:8080 -v usersd-data:/data -e USERS_API_KEYS="$(openssl rand -base64 24)" usersd
#
# On PostgreSQL, give USERS_DB a postgres:// URL instead of the volume. Probes: GET /livez for
# liveness, GET /readyz for readiness (see docs/DEPLOYMENT.md#probes-and-stopping).

FROM golang:1.27-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
# Static (SQLite is compiled from Go), without the build machine's paths, stamped with VERSION.
RUN CGO_ENABLED=0 go build -trimpath -buildvcs=false -ldflags "-s -w -X main.version=${VERSION}" -o /out/usersd ./cmd/usersd && \
    mkdir -p /out/data

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/usersd /usersd
# The volume's folder belongs to the user the service runs as (distroless' nonroot, 65532).
COPY --from=build --chown=65532:65532 /out/data /data
ENV USERS_ADDR=:8080 USERS_DB=/data/users.db
VOLUME /data
USER 65532:65532
EXPOSE 8080
# The image has no shell or curl: the binary asks its own /readyz (usersd healthcheck). Three
# failed checks 10 s apart leave a start 30 s (dockerfilelint does not know --start-period).
HEALTHCHECK --interval=10s --timeout=5s --retries=3 CMD ["/usersd", "healthcheck"]
ENTRYPOINT ["/usersd"]
