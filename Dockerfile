# A static throttled in an empty image.
#
#   docker build -t throttled .
#   docker run -p 6379:6379 -v throttled-data:/data throttled --requirepass "$PASSWORD"
#
# The server listens on every address of the container (--bind 0.0.0.0) and
# keeps its data in the /data volume. Protected mode stays on: without a
# password (--requirepass, or users in --aclfile) clients from outside the
# container are refused, as Redis refuses them.
FROM golang:1.26.8-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG TARGETOS=linux
ARG TARGETARCH=amd64
RUN TARGETS="$TARGETOS/$TARGETARCH" OUT=/out scripts/release.sh \
    && cp /out/throttled-*-"$TARGETOS"-"$TARGETARCH" /throttled \
    && mkdir /data

FROM scratch
COPY --from=build /throttled /throttled
# The data folder belongs to the unprivileged user the server runs as.
COPY --from=build --chown=65532:65532 /data /data
USER 65532:65532
VOLUME /data
EXPOSE 6379
ENTRYPOINT ["/throttled", "--bind", "0.0.0.0", "--dir", "/data"]
