# evalmeter's image, for builds that can pull base images:
#
#   docker build -t evalmeter:dev .
#
# Machines with no image registry build the same image without pulling anything
# with `make image` (hack/offline/image.sh): same flags, same user, same entrypoint.
#
# One static binary (no cgo) on distroless static: CA certificates, /etc/passwd
# with nonroot (65532), /tmp, and nothing else (no shell).

# The base images; override them to use a mirror (--build-arg GO_IMAGE=...).
ARG GO_IMAGE=golang:1.26.8-bookworm
ARG BASE_IMAGE=gcr.io/distroless/static-debian12:nonroot

FROM ${GO_IMAGE} AS build
WORKDIR /src
# Dependencies first: this layer is reused while go.mod and go.sum don't change.
COPY go.mod go.sum ./
RUN go mod download
COPY . .
# The release and commit evalmeter version prints (the build has no .git):
#   docker build --build-arg VERSION=$(go run ./hack/release version) --build-arg COMMIT=$(git rev-parse HEAD) .
ARG VERSION=dev
ARG COMMIT=
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=${VERSION} -X main.commit=${COMMIT}" -o /out/evalmeter ./cmd/evalmeter

FROM ${BASE_IMAGE}
COPY --from=build /out/evalmeter /evalmeter
USER 65532:65532
WORKDIR /
ENTRYPOINT ["/evalmeter"]
