/** True when HOST (of HOST:PORT) is a loopback address or name. */
export function isLoopbackListen(listen: string): boolean {
  return isLoopbackHost(splitListen(listen).host);
}

/** True for `localhost`, `::1` (bracketed or not) and 127.0.0.0/8. */
export function isLoopbackHost(hostname: string): boolean {
  const host = hostname.replace(/^\[(.*)\]$/, '$1').toLowerCase();
  return host === 'localhost' || host === '::1' || /^127(\.\d{1,3}){3}$/.test(host);
}

/** https, or plain http on a loopback host only (an identity provider run for development). */
export function isSecureOrLoopback(url: URL): boolean {
  return url.protocol === 'https:' || (url.protocol === 'http:' && isLoopbackHost(url.hostname));
}

export function splitListen(listen: string): { host: string; port: number } {
  const i = listen.lastIndexOf(':');
  let host = listen.slice(0, i);
  if (host.startsWith('[') && host.endsWith(']')) host = host.slice(1, -1);
  return { host, port: Number(listen.slice(i + 1)) };
}
