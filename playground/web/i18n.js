// The page's words, in English and Spanish. The language follows the browser
// (navigator.languages) until the reader picks one with the switch, which is remembered.
// Wire values (EXCLUSIVE, SHARED_READ, end causes, policies, the server's own error
// messages) stay as the API spells them: they are what a reader meets again in code.
// This module touches no DOM when imported, so the tests can load it in Node to check that
// both languages have the same words.

const STORAGE_KEY = 'caerus-lang';

export const WORDS = {
  en: {
    'page.title': 'Caerus DLS Playground',
    'page.lede': 'Everything here runs on the real server you are connected to: transactions, queues, fencing tokens, lease expiries and deadlock resolution are the engine\'s, shown live. Locks taken by other clients of this cluster show up too.',
    'bar.lang': 'Language',
    'bar.apiKey': 'API key',
    'bar.apiKeyHint': 'only if the server has a keys file',
    'auth.noKey': 'This server needs an API key: paste an admin key into the "API key" field above',
    'auth.unknownKey': 'The server does not know this API key: paste a valid admin key into the "API key" field above',
    'auth.notAdmin': 'This API key may not do this (the page needs an admin key): paste an admin key into the "API key" field above',
    'bar.scenario': 'Scenario',
    'bar.run': 'Run scenario',
    'bar.clear': 'End all my transactions',
    'scenario.deadlock2': 'Two-way deadlock',
    'scenario.deadlock3': 'Three-way deadlock',
    'scenario.fairness': 'Reader/writer fairness',
    'scenario.gcpause': 'GC pause and a stale fencing token',
    'scenario.election': 'Leader election and failover',
    'note.election': 'node-a, node-b and node-c campaign for one key: node-a leads (its term is its fencing token), the others wait in line. node-a crashes (heartbeats off): when its lease lapses node-b leads with a higher term. node-b resigns: node-c takes over at once. The line above the panels follows the key live (WatchKey).',
    'election.leader': ({ key, name, term }) => `Leader of ${key}: ${name}, term ${term}`,
    'election.none': ({ key }) => `Nobody leads ${key}`,
    'log.leads': ({ name, term }) => `${name} now leads (term ${term})`,
    'log.leadershipLost': ({ name, kind }) => `${name} no longer leads (${kind})`,
    'log.leaderCrash': ({ name }) => `${name} crashes: its heartbeats stop`,
    'log.resign': ({ name }) => `${name} resigns`,
    'note.deadlock2': 'alice (priority 5) holds a, bob (priority 1) holds b; each then asks for the other\'s key. The server finds the cycle and aborts the lowest priority; alice proceeds and commits.',
    'note.deadlock3': 'alice → bob → carol → alice, over keys a, b, c. carol has the lowest priority and is the victim; the other two finish one after the other.',
    'note.fairness': 'reader-1 reads; writer queues; reader-2 arrives and queues BEHIND the writer (FIFO: readers cannot starve a writer) although it could share with reader-1. reader-1 commits, the writer goes, then reader-2.',
    'note.gcpause': 'worker-1 takes the lock and writes with its token. Then it "pauses" (heartbeats off) until its lease lapses; worker-2 gets the lock with a higher token and writes. worker-1 wakes and writes with its old token: the fenced store rejects it.',
    'panel.cluster': 'Cluster',
    'panel.clients': 'Simulated clients',
    'panel.locks': 'Locks (holders and FIFO queues)',
    'panel.graph': 'Wait-for graph',
    'panel.store': 'Fenced store',
    'panel.timeline': 'Timeline',
    'panel.storeHelp': 'A tiny register simulated in this page: it accepts a write only if its fencing token is higher than every token it accepted before (what real storage does with Caerus tokens).',
    'cluster.connecting': 'connecting…',
    'cluster.member': ({ id, addr }) => `node ${id} · gRPC ${addr}`,
    'cluster.leader': ' ★ leader',
    'cluster.thisPage': ({ http }) => ` · serves this page (HTTP ${http})`,
    'cluster.summary': ({ term, token, active, seq }) => `term ${term} · last fencing token ${token} · ${active} active transaction${active === 1 ? '' : 's'} · last event #${seq}`,
    'cluster.unreadable': ({ msg }) => `cannot read cluster status: ${msg}`,
    'form.name': 'name',
    'form.priority': 'priority',
    'form.lease': 'lease ms',
    'form.begin': 'Begin transaction',
    'locks.none': 'no locks held',
    'locks.upgrade': ' (upgrade)',
    'locks.semaphore': ({ n, used }) => `(semaphore: ${used} of ${n} permits held)`,
    'txn.permits': 'permits',
    'txn.permitsHint': 'With SEMAPHORE: the semaphore\'s permit count (up to that many holders at once; everyone on the key must say the same)',
    'locks.unreadable': ({ msg }) => `cannot list locks: ${msg}`,
    'locks.delayed': ({ s, who, cause }) => `lock-delay ${s} s: ${who} was revoked (${cause}), nothing is granted until it ends`,
    'locks.delayHelp': 'A holder was revoked in a namespace with a lock-delay: the key stays unavailable for the delay, so a process that still believes it holds it has time to stop. A normal release is never delayed.',
    'lockDelay.title': 'Lock-delay',
    'lockDelay.help': 'How long the keys of a holder whose lease expired, or that was aborted, stay unavailable in namespaces starting with the prefix (0 removes the rule; an admin call).',
    'lockDelay.prefix': 'namespace prefix',
    'lockDelay.ms': 'ms',
    'lockDelay.set': 'Set',
    'lockDelay.none': 'no lock-delay: a revoked holder\'s keys pass on at once',
    'lockDelay.rule': ({ prefix, s }) => `${prefix || '(every namespace)'}: ${s} s`,
    'lockDelay.unreadable': ({ msg }) => `cannot read lock-delays: ${msg}`,
    'log.lockDelaySet': ({ prefix, s }) => `lock-delay for namespaces "${prefix}"*: ${s} s`,
    'log.lockDelayFailed': ({ msg }) => `lock-delay not set: ${msg}`,
    'graph.label': 'wait-for graph',
    'graph.nobody': 'nobody is waiting',
    'graph.victim': '✖ victim',
    'deadlock.none': 'no deadlock yet',
    'deadlock.line': ({ seq, path, victim, id, policy }) => `Deadlock (event #${seq}): ${path}. Victim: ${victim} (#${id}), policy ${policy}. The others proceed.`,
    'state.ACTIVE': 'ACTIVE',
    'state.COMMITTED': 'COMMITTED',
    'state.ABORTED': 'ABORTED',
    'state.EXPIRED': 'EXPIRED',
    'txn.header': ({ id, priority }) => `#${id} · priority ${priority}`,
    'txn.victim': 'DEADLOCK VICTIM',
    'txn.leaseLeft': ({ s }) => `lease ${s} s left`,
    'txn.heartbeats': ' heartbeats',
    'txn.token': ({ token }) => `token ${token}`,
    'txn.release': 'release',
    'txn.waiting': ({ mode, key }) => `waiting for ${mode} ${key}…`,
    'txn.namespace': 'namespace',
    'txn.key': 'key',
    'txn.keyHint': 'one key, or several separated by commas: all granted together or none',
    'txn.mode': 'mode',
    'txn.acquire': 'Acquire',
    'txn.commit': 'Commit',
    'txn.abort': 'Abort',
    'txn.write': 'Write to store',
    'txn.writeHint': 'write to the fenced store with the newest token this client holds',
    'reason.committed': 'committed',
    'reason.abortedByClient': 'aborted by its client',
    'reason.victim': 'deadlock victim',
    'reason.expired': 'lease expired',
    'store.highest': 'highest token accepted: ',
    'store.row': ({ who, token, ok }) => `${who} wrote with token ${token}: ${ok ? 'accepted' : 'REJECTED (stale token)'}`,
    'log.scenario': ({ name, ns }) => `scenario "${name}" in namespace ${ns}`,
    'log.scenarioFailed': ({ msg }) => `scenario failed: ${msg}`,
    'log.beginFailed': ({ kind, msg }) => `begin failed: ${kind}: ${msg}`,
    'log.began': ({ name, id, priority, lease }) => `${name} began transaction #${id} (priority ${priority}, lease ${lease} ms)`,
    'log.heartbeats': ({ name, on }) => `${name}: heartbeats ${on ? 'ON' : 'OFF (the lease will lapse)'}`,
    'log.queued': ({ name, mode, key, position, by }) => `${name} queued for ${mode} ${key} at position ${position}${by ? `, behind ${by}` : ''}`,
    'log.acquireFailed': ({ name, key, kind, msg }) => `${name}: acquire ${key} failed: ${kind}: ${msg}`,
    'log.granted': ({ name, mode, key, token }) => `${name} GRANTED ${mode} ${key} — fencing token ${token}`,
    'log.released': ({ name, key, held }) => `${name} released ${key}${held ? '' : ' (was not held)'}`,
    'log.releaseFailed': ({ name, msg }) => `${name}: release failed: ${msg}`,
    'log.ended': ({ name, state, n }) => `${name} ${state.toLowerCase()} (released ${n} lock${n === 1 ? '' : 's'})`,
    'log.endFailed': ({ name, msg }) => `${name}: end failed: ${msg}`,
    'log.noToken': ({ name }) => `${name} holds no token to write with`,
    'log.storeWrite': ({ name, token, ok, last }) => `fenced store: write by ${name} with token ${token} ${ok ? 'ACCEPTED' : `REJECTED (stale: the store has seen token ${last})`}`,
    'log.waitsFor': ({ name, key }) => `${name} (waits for ${key})`,
    'log.deadlock': ({ path, victim, id, policy, seq }) => `DEADLOCK detected: ${path}. Victim: ${victim} #${id} (${policy}). Event #${seq}`,
    'log.expired': ({ name, n, seq }) => `${name} EXPIRED: lease lapsed, ${n} lock${n === 1 ? '' : 's'} freed. Event #${seq}`,
    'log.aborted': ({ name, operator, reason, seq }) => `${name} aborted by ${operator || 'an operator'}: ${reason}. Event #${seq}`,
    'log.revoked': ({ key, token, id, cause, seq }) => `lock ${key} (token ${token}) of #${id} revoked (${cause}). Event #${seq}`,
    'log.streamEnded': ({ msg }) => `event stream ended: ${msg}`,
    'log.streamRetry': ({ msg }) => `event stream: ${msg}; reconnecting`,
    'log.stall': 'worker-1 stalls (GC pause): heartbeats OFF',
    'log.wake': 'worker-1 wakes up and, still believing it holds the lock, writes with its old token',
  },
  es: {
    'page.title': 'Caerus DLS: Playground',
    'page.lede': 'Todo lo que ves corre en el servidor real al que estás conectado: las transacciones, las colas, los tokens de fencing, la expiración de las concesiones (leases) y la resolución de interbloqueos son los del motor, en vivo. También aparecen los bloqueos que toman otros clientes de este clúster.',
    'bar.lang': 'Idioma',
    'bar.apiKey': 'Clave de API',
    'bar.apiKeyHint': 'solo si el servidor tiene un archivo de claves',
    'auth.noKey': 'Este servidor pide una clave de API: pega una clave de administración en el campo «Clave de API» de arriba',
    'auth.unknownKey': 'El servidor no conoce esta clave de API: pega una clave de administración válida en el campo «Clave de API» de arriba',
    'auth.notAdmin': 'Esta clave de API no puede hacer esto (la página necesita una clave de administración): pega una en el campo «Clave de API» de arriba',
    'bar.scenario': 'Escenario',
    'bar.run': 'Ejecutar escenario',
    'bar.clear': 'Terminar todas mis transacciones',
    'scenario.deadlock2': 'Interbloqueo entre dos',
    'scenario.deadlock3': 'Interbloqueo entre tres',
    'scenario.fairness': 'Equidad entre lectores y escritor',
    'scenario.gcpause': 'Pausa de GC y un token de fencing caducado',
    'scenario.election': 'Elección de líder y relevo',
    'note.election': 'node-a, node-b y node-c se postulan por una clave: node-a lidera (su mandato es su token de fencing) y los demás esperan en cola. node-a cae (latidos apagados): cuando vence su concesión, node-b lidera con un mandato mayor. node-b renuncia: node-c toma el relevo enseguida. La línea sobre los paneles sigue la clave en vivo (WatchKey).',
    'election.leader': ({ key, name, term }) => `Líder de ${key}: ${name}, mandato ${term}`,
    'election.none': ({ key }) => `Nadie lidera ${key}`,
    'log.leads': ({ name, term }) => `${name} lidera ahora (mandato ${term})`,
    'log.leadershipLost': ({ name, kind }) => `${name} ya no lidera (${kind})`,
    'log.leaderCrash': ({ name }) => `${name} cae: sus latidos se detienen`,
    'log.resign': ({ name }) => `${name} renuncia`,
    'note.deadlock2': 'alice (prioridad 5) tiene a, bob (prioridad 1) tiene b; luego cada uno pide la clave del otro. El servidor encuentra el ciclo y aborta la prioridad más baja; alice sigue y confirma.',
    'note.deadlock3': 'alice → bob → carol → alice, sobre las claves a, b y c. carol tiene la prioridad más baja y es la víctima; los otros dos terminan uno tras otro.',
    'note.fairness': 'reader-1 lee; writer espera en la cola; llega reader-2 y espera DETRÁS del escritor (FIFO: los lectores no pueden dejar sin turno a un escritor) aunque podría compartir con reader-1. reader-1 confirma, pasa el escritor y luego reader-2.',
    'note.gcpause': 'worker-1 toma el bloqueo y escribe con su token. Luego se "pausa" (latidos apagados) hasta que vence su concesión; worker-2 obtiene el bloqueo con un token mayor y escribe. worker-1 despierta y escribe con su token viejo: el almacén protegido lo rechaza.',
    'panel.cluster': 'Clúster',
    'panel.clients': 'Clientes simulados',
    'panel.locks': 'Bloqueos (titulares y colas FIFO)',
    'panel.graph': 'Grafo de esperas',
    'panel.store': 'Almacén protegido',
    'panel.timeline': 'Cronología',
    'panel.storeHelp': 'Un pequeño registro simulado en esta página: acepta una escritura solo si su token de fencing es mayor que todos los que aceptó antes (lo que hace un almacenamiento real con los tokens de Caerus).',
    'cluster.connecting': 'conectando…',
    'cluster.member': ({ id, addr }) => `nodo ${id} · gRPC ${addr}`,
    'cluster.leader': ' ★ líder',
    'cluster.thisPage': ({ http }) => ` · sirve esta página (HTTP ${http})`,
    'cluster.summary': ({ term, token, active, seq }) => `mandato ${term} · último token de fencing ${token} · ${active} transacci${active === 1 ? 'ón activa' : 'ones activas'} · último evento #${seq}`,
    'cluster.unreadable': ({ msg }) => `no se puede leer el estado del clúster: ${msg}`,
    'form.name': 'nombre',
    'form.priority': 'prioridad',
    'form.lease': 'concesión ms',
    'form.begin': 'Iniciar transacción',
    'locks.none': 'no hay bloqueos tomados',
    'locks.upgrade': ' (ascenso)',
    'locks.semaphore': ({ n, used }) => `(semáforo: ${used} de ${n} permisos tomados)`,
    'txn.permits': 'permisos',
    'txn.permitsHint': 'Con SEMAPHORE: el número de permisos del semáforo (hasta tantos titulares a la vez; todos en la clave deben indicar el mismo)',
    'locks.unreadable': ({ msg }) => `no se pueden listar los bloqueos: ${msg}`,
    'locks.delayed': ({ s, who, cause }) => `retardo ${s} s: ${who} fue revocado (${cause}), no se concede nada hasta que termine`,
    'locks.delayHelp': 'Un titular fue revocado en un espacio de nombres con retardo: la clave queda no disponible durante el retardo, para que un proceso que aún cree tenerla pueda detenerse. Una liberación normal nunca se retrasa.',
    'lockDelay.title': 'Retardo de bloqueo',
    'lockDelay.help': 'Cuánto tiempo quedan no disponibles las claves de un titular cuya concesión venció, o que fue abortado, en los espacios de nombres que empiezan por el prefijo (0 quita la regla; llamada de administración).',
    'lockDelay.prefix': 'prefijo de espacio de nombres',
    'lockDelay.ms': 'ms',
    'lockDelay.set': 'Fijar',
    'lockDelay.none': 'sin retardo: las claves de un titular revocado pasan al siguiente enseguida',
    'lockDelay.rule': ({ prefix, s }) => `${prefix || '(todos los espacios)'}: ${s} s`,
    'lockDelay.unreadable': ({ msg }) => `no se pueden leer los retardos: ${msg}`,
    'log.lockDelaySet': ({ prefix, s }) => `retardo para los espacios "${prefix}"*: ${s} s`,
    'log.lockDelayFailed': ({ msg }) => `retardo no fijado: ${msg}`,
    'graph.label': 'grafo de esperas',
    'graph.nobody': 'nadie está esperando',
    'graph.victim': '✖ víctima',
    'deadlock.none': 'todavía no hay interbloqueos',
    'deadlock.line': ({ seq, path, victim, id, policy }) => `Interbloqueo (evento #${seq}): ${path}. Víctima: ${victim} (#${id}), política ${policy}. Los demás siguen.`,
    'state.ACTIVE': 'ACTIVA',
    'state.COMMITTED': 'CONFIRMADA',
    'state.ABORTED': 'ABORTADA',
    'state.EXPIRED': 'EXPIRADA',
    'txn.header': ({ id, priority }) => `#${id} · prioridad ${priority}`,
    'txn.victim': 'VÍCTIMA DE INTERBLOQUEO',
    'txn.leaseLeft': ({ s }) => `quedan ${s} s de concesión`,
    'txn.heartbeats': ' latidos',
    'txn.token': ({ token }) => `token ${token}`,
    'txn.release': 'liberar',
    'txn.waiting': ({ mode, key }) => `esperando ${mode} ${key}…`,
    'txn.namespace': 'espacio de nombres',
    'txn.key': 'clave',
    'txn.keyHint': 'una clave, o varias separadas por comas: se conceden todas juntas o ninguna',
    'txn.mode': 'modo',
    'txn.acquire': 'Adquirir',
    'txn.commit': 'Confirmar',
    'txn.abort': 'Abortar',
    'txn.write': 'Escribir en el almacén',
    'txn.writeHint': 'escribir en el almacén protegido con el token más nuevo que tiene este cliente',
    'reason.committed': 'confirmada',
    'reason.abortedByClient': 'abortada por su cliente',
    'reason.victim': 'víctima de interbloqueo',
    'reason.expired': 'concesión vencida',
    'store.highest': 'token más alto aceptado: ',
    'store.row': ({ who, token, ok }) => `${who} escribió con el token ${token}: ${ok ? 'aceptada' : 'RECHAZADA (token caducado)'}`,
    'log.scenario': ({ name, ns }) => `escenario "${name}" en el espacio de nombres ${ns}`,
    'log.scenarioFailed': ({ msg }) => `el escenario falló: ${msg}`,
    'log.beginFailed': ({ kind, msg }) => `no se pudo iniciar: ${kind}: ${msg}`,
    'log.began': ({ name, id, priority, lease }) => `${name} inició la transacción #${id} (prioridad ${priority}, concesión ${lease} ms)`,
    'log.heartbeats': ({ name, on }) => `${name}: latidos ${on ? 'ENCENDIDOS' : 'APAGADOS (la concesión vencerá)'}`,
    'log.queued': ({ name, mode, key, position, by }) => `${name} en cola para ${mode} ${key} en la posición ${position}${by ? `, detrás de ${by}` : ''}`,
    'log.acquireFailed': ({ name, key, kind, msg }) => `${name}: no se pudo adquirir ${key}: ${kind}: ${msg}`,
    'log.granted': ({ name, mode, key, token }) => `${name} OBTUVO ${mode} ${key} — token de fencing ${token}`,
    'log.released': ({ name, key, held }) => `${name} liberó ${key}${held ? '' : ' (no lo tenía)'}`,
    'log.releaseFailed': ({ name, msg }) => `${name}: no se pudo liberar: ${msg}`,
    'log.ended': ({ name, state, n }) => `${name} ${WORDS.es[`state.${state}`].toLowerCase()} (liberó ${n} bloqueo${n === 1 ? '' : 's'})`,
    'log.endFailed': ({ name, msg }) => `${name}: no se pudo terminar: ${msg}`,
    'log.noToken': ({ name }) => `${name} no tiene ningún token con el que escribir`,
    'log.storeWrite': ({ name, token, ok, last }) => `almacén protegido: escritura de ${name} con el token ${token} ${ok ? 'ACEPTADA' : `RECHAZADA (caducado: el almacén ya vio el token ${last})`}`,
    'log.waitsFor': ({ name, key }) => `${name} (espera ${key})`,
    'log.deadlock': ({ path, victim, id, policy, seq }) => `INTERBLOQUEO detectado: ${path}. Víctima: ${victim} #${id} (${policy}). Evento #${seq}`,
    'log.expired': ({ name, n, seq }) => `${name} EXPIRÓ: venció su concesión, ${n} bloqueo${n === 1 ? ' liberado' : 's liberados'}. Evento #${seq}`,
    'log.aborted': ({ name, operator, reason, seq }) => `${name} abortada por ${operator || 'un operador'}: ${reason}. Evento #${seq}`,
    'log.revoked': ({ key, token, id, cause, seq }) => `bloqueo ${key} (token ${token}) de #${id} revocado (${cause}). Evento #${seq}`,
    'log.streamEnded': ({ msg }) => `terminó el flujo de eventos: ${msg}`,
    'log.streamRetry': ({ msg }) => `flujo de eventos: ${msg}; reconectando`,
    'log.stall': 'worker-1 se detiene (pausa de GC): latidos APAGADOS',
    'log.wake': 'worker-1 despierta y, creyendo que aún tiene el bloqueo, escribe con su token viejo',
  },
};

export const LANGS = Object.keys(WORDS);

/** The reader's pick if any, else the first browser language we speak, else English. */
export function preferred(stored, browserLangs) {
  if (LANGS.includes(stored)) return stored;
  for (const l of browserLangs || []) {
    const base = String(l).toLowerCase().split('-')[0];
    if (LANGS.includes(base)) return base;
  }
  return 'en';
}

let current = typeof window === 'undefined' ? 'en' : preferred(localStorage.getItem(STORAGE_KEY), navigator.languages);

export const lang = () => current;

/** The word `key` in the current language, filled in with `vars`. */
export function t(key, vars = {}) {
  const w = WORDS[current][key] ?? WORDS.en[key];
  if (w === undefined) throw new Error(`no words for ${key}`);
  return typeof w === 'function' ? w(vars) : w;
}

/** Fills the page's fixed text: `data-i18n` (text) and `data-i18n-<attribute>`. */
export function translatePage(root = document) {
  document.documentElement.lang = current;
  document.title = t('page.title');
  for (const el of root.querySelectorAll('[data-i18n]')) el.textContent = t(el.dataset.i18n);
  for (const attr of ['placeholder', 'aria-label', 'title']) {
    for (const el of root.querySelectorAll(`[data-i18n-${attr}]`)) el.setAttribute(attr, t(el.getAttribute(`data-i18n-${attr}`)));
  }
}

const listeners = [];

/** Runs `fn` after each change of language (the page redraws what it drew with words). */
export function onLanguage(fn) {
  listeners.push(fn);
}

export function setLanguage(l) {
  if (!LANGS.includes(l) || l === current) return;
  current = l;
  localStorage.setItem(STORAGE_KEY, l);
  translatePage();
  for (const fn of listeners) fn();
}
