//! How a core future's result reaches JavaScript. napi-rs's `async fn` makes (and later
//! tears down) a thread-safe function, with its libuv handle, for every call; here one
//! thread-safe function per JavaScript thread carries every result: the tokio task queues
//! its completion and, unless a wake-up is already on its way, calls it. On the JavaScript
//! thread the queued promises are settled in one go. The function is referenced (keeps
//! Node alive) only while calls are pending, as a pending napi-rs promise would.

use std::cell::RefCell;
use std::ffi::c_void;
use std::future::Future;
use std::ptr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use napi::bindgen_prelude::{spawn, ToNapiValue, Unknown};
use napi::{check_status, sys, Env, JsError, Result};

/// A result to hand to its promise, on the JavaScript thread.
type Completion = Box<dyn FnOnce(sys::napi_env) + Send>;

/// A raw N-API handle, used only where the N-API allows (see each use).
#[derive(Clone, Copy)]
struct Raw<T>(T);
// SAFETY: deferreds are settled, and the thread-safe function (un)referenced, only on the
// JavaScript thread; `napi_call_threadsafe_function` may be called from any thread.
unsafe impl<T> Send for Raw<T> {}
unsafe impl<T> Sync for Raw<T> {}

/// One JavaScript thread's completion queue and the thread-safe function that drains it.
struct Bridge {
    tsfn: OnceLock<Raw<sys::napi_threadsafe_function>>,
    queue: Mutex<Vec<Completion>>,
    /// True while a drain is scheduled: later completions ride on it.
    armed: AtomicBool,
    /// Calls whose promise is not settled yet (changed on the JavaScript thread only).
    pending: AtomicUsize,
    /// Set when the environment is torn down: nothing may be sent any more.
    closed: Mutex<bool>,
}

thread_local! {
    /// The bridge of the JavaScript thread (main thread or worker) this thread runs.
    static BRIDGE: RefCell<Option<Arc<Bridge>>> = const { RefCell::new(None) };
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Bridge {
    /// The bridge of the calling JavaScript thread, made on first use.
    fn current(env: &Env) -> Result<Arc<Bridge>> {
        if let Some(bridge) = BRIDGE.with(|b| b.borrow().clone()) {
            return Ok(bridge);
        }
        let raw_env = env.raw();
        let bridge = Arc::new(Bridge {
            tsfn: OnceLock::new(),
            queue: Mutex::new(Vec::new()),
            armed: AtomicBool::new(false),
            pending: AtomicUsize::new(0),
            closed: Mutex::new(false),
        });
        let label = "caerus-dls";
        let mut name = ptr::null_mut();
        check_status!(unsafe {
            sys::napi_create_string_utf8(raw_env, label.as_ptr().cast(), label.len() as isize, &mut name)
        })?;
        // The context is a strong reference for as long as the environment lives; the
        // cleanup hook closes the bridge and gives the reference back.
        let context = Arc::into_raw(Arc::clone(&bridge)) as *mut c_void;
        let mut tsfn = ptr::null_mut();
        check_status!(unsafe {
            sys::napi_create_threadsafe_function(
                raw_env,
                ptr::null_mut(),
                ptr::null_mut(),
                name,
                0,
                1,
                ptr::null_mut(),
                None,
                context,
                Some(drain),
                &mut tsfn,
            )
        })?;
        check_status!(unsafe { sys::napi_unref_threadsafe_function(raw_env, tsfn) })?;
        check_status!(unsafe { sys::napi_add_env_cleanup_hook(raw_env, Some(close), context) })?;
        let _ = bridge.tsfn.set(Raw(tsfn));
        BRIDGE.with(|b| *b.borrow_mut() = Some(Arc::clone(&bridge)));
        Ok(bridge)
    }

    fn tsfn(&self) -> sys::napi_threadsafe_function {
        self.tsfn.get().map_or(ptr::null_mut(), |t| t.0)
    }

    /// On the JavaScript thread, as a call starts: keep Node alive until it settles.
    fn started(&self, env: sys::napi_env) {
        if self.pending.fetch_add(1, Ordering::Relaxed) == 0 {
            unsafe { sys::napi_ref_threadsafe_function(env, self.tsfn()) };
        }
    }

    /// From any thread: queue `done` and make sure the JavaScript thread will drain it.
    fn push(&self, done: Completion) {
        lock(&self.queue).push(done);
        if !self.armed.swap(true, Ordering::AcqRel) {
            let closed = lock(&self.closed);
            if !*closed {
                unsafe {
                    sys::napi_call_threadsafe_function(
                        self.tsfn(),
                        ptr::null_mut(),
                        sys::ThreadsafeFunctionCallMode::nonblocking,
                    )
                };
            }
        }
    }
}

/// The thread-safe function's callback, on the JavaScript thread: settles what is queued.
/// Disarms before taking the queue, so a completion queued meanwhile either is taken now
/// or schedules another drain.
unsafe extern "C" fn drain(env: sys::napi_env, _js: sys::napi_value, context: *mut c_void, _data: *mut c_void) {
    if env.is_null() || context.is_null() {
        return; // the environment is going away
    }
    let bridge = unsafe { &*(context as *const Bridge) };
    bridge.armed.store(false, Ordering::Release);
    let done = std::mem::take(&mut *lock(&bridge.queue));
    let settled = done.len();
    for completion in done {
        completion(env);
    }
    if settled > 0 && bridge.pending.fetch_sub(settled, Ordering::Relaxed) == settled {
        unsafe { sys::napi_unref_threadsafe_function(env, bridge.tsfn()) };
    }
}

/// Environment cleanup: stop calling the thread-safe function and release the context's
/// reference (tasks still running keep their own).
unsafe extern "C" fn close(context: *mut c_void) {
    let bridge = unsafe { Arc::from_raw(context as *const Bridge) };
    *lock(&bridge.closed) = true;
    BRIDGE.with(|b| b.borrow_mut().take());
}

/// Runs `fut` on the tokio runtime and returns a JavaScript promise of its result; an
/// error rejects it (core errors as records, see `errors::to_js`).
pub(crate) fn promise<'env, T, F>(env: &'env Env, fut: F) -> Result<Unknown<'env>>
where
    T: ToNapiValue + Send + 'static,
    F: Future<Output = Result<T>> + Send + 'static,
{
    let bridge = Bridge::current(env)?;
    let raw_env = env.raw();
    let (mut deferred, mut promise) = (ptr::null_mut(), ptr::null_mut());
    check_status!(unsafe { sys::napi_create_promise(raw_env, &mut deferred, &mut promise) })?;
    bridge.started(raw_env);
    let deferred = Raw(deferred);
    let sender = Arc::clone(&bridge);
    spawn(async move {
        let result = fut.await;
        sender.push(Box::new(move |env| unsafe { settle(env, deferred, result) }));
    });
    Ok(unsafe { Unknown::from_raw_unchecked(raw_env, promise) })
}

/// Resolves or rejects the promise; on the JavaScript thread.
unsafe fn settle<T: ToNapiValue>(env: sys::napi_env, deferred: Raw<sys::napi_deferred>, result: Result<T>) {
    let value = result.and_then(|v| unsafe { T::to_napi_value(env, v) });
    match value {
        Ok(value) => unsafe { sys::napi_resolve_deferred(env, deferred.0, value) },
        Err(error) => unsafe { sys::napi_reject_deferred(env, deferred.0, JsError::from(error).into_value(env)) },
    };
}
