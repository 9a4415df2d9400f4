# One image with every Isle binary; docker-compose.yml picks the command.
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/ ./cmd/api ./cmd/worker ./cmd/relay ./cmd/reconcile ./cmd/islectl

FROM alpine:3.20
# /var/lib/isle holds the token key compose's migrate service makes, and
# /var/lib/isle-objects the objects of the file stores; a new
# volume mounted there takes this directory's owner.
RUN apk add --no-cache ca-certificates tzdata && adduser -D -u 10001 isle && \
    mkdir -p /var/lib/isle /var/lib/isle-objects && chown isle:isle /var/lib/isle /var/lib/isle-objects && \
    chmod 700 /var/lib/isle /var/lib/isle-objects
COPY --from=build /out/ /usr/local/bin/
USER isle
# Each service sets its command: api, worker, relay, reconcile or islectl.
CMD ["api"]
