# The winready image: one static binary that is the operator, the UDP 4789
# probe agent, the pod network check and `winready plan`.
#
# The base images are build arguments so that a team pins them by digest from
# its own registry, for instance:
#   docker build --build-arg GO_IMAGE=registry.example.com/golang@sha256:<digest> \
#     --build-arg BASE_IMAGE=registry.example.com/distroless/static@sha256:<digest> .
# make image builds the same binary on an empty base without a Docker engine.
ARG GO_IMAGE=golang:1.26
ARG BASE_IMAGE=gcr.io/distroless/static-debian12:nonroot

FROM --platform=$BUILDPLATFORM ${GO_IMAGE} AS build
WORKDIR /src
ENV GONOSUMDB=github.com/tigera,github.com/projectcalico
COPY go.mod go.sum ./
RUN go mod download
# Every package of the binary; .dockerignore keeps the tests out.
# hack/dockerfile-check.sh emulates these lines in CI.
COPY *.go ./
COPY api/ api/
COPY controllers/ controllers/
COPY internal/ internal/
# kubectl winready check compares the admission policies with these, embedded.
COPY config/admission/ config/admission/
ARG TARGETOS=linux
ARG TARGETARCH=amd64
ARG VERSION=dev
ARG REVISION=unknown
RUN CGO_ENABLED=0 GOOS=${TARGETOS} GOARCH=${TARGETARCH} go build -trimpath -buildvcs=false \
    -ldflags "-s -w -buildid= -X github.com/winready/winready/internal/version.Version=${VERSION} -X github.com/winready/winready/internal/version.Revision=${REVISION}" \
    -o /out/winready .

# Run: the static binary as a non-root user.
FROM ${BASE_IMAGE}
ARG VERSION=dev
ARG REVISION=unknown
LABEL org.opencontainers.image.source="https://github.com/winready/winready" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.version="${VERSION}"
COPY --from=build /out/winready /winready
USER 65532:65532
ENTRYPOINT ["/winready"]
