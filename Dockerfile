# syntax=docker/dockerfile:1
# Touchstone server image: docker build -t touchstone:0.1.0 .
# The Helm chart (deploy/helm/touchstone) runs this image; see docs/kubernetes.md.

ARG NODE_IMAGE=node:22.23.3-bookworm-slim

# Builder: installs every dependency, compiles the native module re2 (better-sqlite3 ships a
# prebuilt Node-API binary), builds dist/ and the web UI, then drops the dev dependencies.
FROM ${NODE_IMAGE} AS build
RUN apt-get update \
 && apt-get install -y --no-install-recommends python3 make g++ \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --ignore-scripts --no-audit --no-fund \
 && npm rebuild re2
COPY tsconfig.json tsconfig.build.json ./
COPY bin ./bin
COPY scripts ./scripts
COPY src ./src
COPY ui ./ui
RUN npm run build \
 && npm prune --omit=dev --ignore-scripts --no-audit --no-fund

# Runtime: the compiled server and its production dependencies only, as a non-root user. The
# root filesystem can be mounted read-only: data lives in the /var/lib/touchstone volume and
# scratch files in /tmp.
FROM ${NODE_IMAGE} AS runtime
ENV NODE_ENV=production
WORKDIR /app
COPY --from=build /app/package.json ./package.json
COPY --from=build /app/node_modules ./node_modules
COPY --from=build /app/bin ./bin
COPY --from=build /app/dist ./dist
COPY deploy/docker/config.yaml /etc/touchstone/config.yaml
RUN groupadd --system --gid 10001 touchstone \
 && useradd --system --uid 10001 --gid touchstone --home-dir /var/lib/touchstone --no-create-home touchstone \
 && mkdir -p /var/lib/touchstone \
 && chown touchstone:touchstone /var/lib/touchstone \
 && ln -s /app/bin/touchstone.js /usr/local/bin/touchstone
USER 10001:10001
VOLUME ["/var/lib/touchstone"]
EXPOSE 4318
HEALTHCHECK --interval=30s --timeout=5s --start-period=30s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:4318/healthz').then((r) => process.exit(r.ok ? 0 : 1), () => process.exit(1))"]
ENTRYPOINT ["node", "/app/bin/touchstone.js"]
CMD ["serve", "--config", "/etc/touchstone/config.yaml"]
