# Build: the same command as `make build`, for the target platform.
FROM golang:1.26 AS build
WORKDIR /src
ENV GONOSUMDB=github.com/tigera,github.com/projectcalico
COPY go.mod go.sum ./
RUN go mod download
COPY main.go ./
COPY api/ api/
COPY controllers/ controllers/
COPY internal/ internal/
ARG TARGETOS=linux
ARG TARGETARCH=amd64
RUN CGO_ENABLED=0 GOOS=${TARGETOS} GOARCH=${TARGETARCH} \
    go build -trimpath -ldflags "-s -w" -o /out/winready .

# Run: static binary on distroless, as a non-root user.
FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/winready /winready
USER 65532:65532
ENTRYPOINT ["/winready"]
