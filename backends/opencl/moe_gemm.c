/* The TensorCore strategy of the SwiGLU experts on OpenCL: CLBlast SGEMM per expert.
 *
 * OpenCL has no portable matrix-unit API; CLBlast's tuned GEMM is the closest thing. CLBlast has
 * no bf16 and PoCL no cl_khr_fp16 (so no HGEMM), hence everything runs in F32:
 *   1. X32 = f32(tokens)                          [rows, H]          (kernels/moe_gemm.cl)
 *   2. per expert e with rows (offsets[e] .. offsets[e+1]):
 *        W32 = f32(gate_e ; up_e), f32(down_e)      [2I, H] and [H, I]
 *        C_e = X32_e W32[0:2I]^T                    CLBlastSgemm, C [rows, 2I], gate | up columns
 *        C_e[:, 0:I] = round_dtype(silu(g) * u)     epilogue in place: the activation A, ld 2I
 *        Y_e = A_e W32_down^T                       CLBlastSgemm into X32's rows of e (consumed)
 *   3. out = round_dtype(Y)                                           (kernels/moe_gemm.cl)
 * FP32 accumulation and the dtype rounding of the activation as backends/README.md says; only
 * the summation order differs from the Scalar kernels (CLBlast's tiling).
 *
 * Workspace (F32 elements, exact): X32/Y [rows, H] + C [rows, 2I] + W32 [3 I H], reported
 * through experts_tensor_core_workspace so ops/ sizes and checks it. Weights are staged one
 * expert at a time: converting every expert at once would need 3 E I H floats (GBs for real
 * models). That also rules out CLBlastSgemmBatched: batches must share m, and experts' row counts
 * differ. CLBlast allocates its own temporary buffer for its indirect GEMM kernel (no device
 * handle is known at workspace-query time to ask CLBlastSGemmTempBufferSize).
 *
 * Everything up to step 3 writes the workspace only: a failure on the way leaves expert_output
 * untouched.
 *
 * Synchronisation: per-expert GEMM shapes need the row counts on the host, so every forward reads
 * offsets [E+1] back with a blocking read (one queue synchronisation per forward), then enqueues
 * everything asynchronously. Experts without rows are skipped.
 *
 * Auto: on CPU devices (PoCL) CLBlast's GPU-shaped kernels lose to the Scalar CPU kernels
 * (measured: see ocl_experts_gemm_auto), so Auto keeps Scalar there; on GPUs Auto picks this path
 * (not yet measured against Scalar there). An explicit TensorCore request runs it everywhere.
 *
 * F32 weights never reach this entry: ops/ rejects TensorCore for them (matrix units need
 * f16/bf16), and Scalar is already F32 there. Compiled only when meson finds CLBlast
 * (RUDNN_HAVE_CLBLAST); the library itself is opened on first use (see "loading CLBlast"). */
#include <clblast_c.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ocl_internal.h"
#include "ocl_launch.h"

enum { K_TO_F32, K_FROM_F32, K_WEIGHTS, K_SWIGLU, K_COUNT };
static const char *const k_names[K_COUNT] = {
    "rudnn_moe_gemm_to_f32",
    "rudnn_moe_gemm_from_f32",
    "rudnn_moe_gemm_weights_f32",
    "rudnn_moe_gemm_swiglu",
};

/* Work-items per group of the element-wise kernels. */
#define GEMM_LOCAL 64u

static const char *const op_name = "swiglu_experts_forward_dispatched";

/* ---- loading CLBlast -------------------------------------------------------------------------
 * CLBlast is opened on first use instead of being a link dependency of the plugin: loading the
 * plugin then does not drag a C++ runtime and CLBlast's static initialisers into every process
 * that only normalises or routes (they shift the heap enough to trip LeakSanitizer's dynamic-TLS
 * heuristic, which crashes at exit with GCC 12 and glibc 2.36), and a machine without the CLBlast
 * runtime still loads the plugin, answering NOT_SUPPORTED for this strategy only. The handle is
 * never closed: CLBlast's program caches live until exit. */

typedef CLBlastStatusCode (*sgemm_fn)(const CLBlastLayout, const CLBlastTranspose,
                                      const CLBlastTranspose, const size_t, const size_t,
                                      const size_t, const float, const cl_mem, const size_t,
                                      const size_t, const cl_mem, const size_t, const size_t,
                                      const float, cl_mem, const size_t, const size_t,
                                      cl_command_queue *, cl_event *);

static pthread_once_t g_clblast_once = PTHREAD_ONCE_INIT;
static sgemm_fn g_sgemm;
static char g_clblast_error[512];
/* One CLBlast call at a time in the process. CLBlast 1.5 (Debian 12's) is not thread-safe on first
 * use: concurrent first calls race in its tuning database (ThreadSanitizer: clblast::Database's
 * constructor), and two threads that both miss its program cache fail the second store ("object
 * already in cache", fixed in CLBlast 1.6.1). A call only enqueues (and compiles the first time),
 * so holding the lock costs little; on PoCL before 6.0 it also waits for its kernels (see
 * ocl_launch.c, "PoCL before 6.0"). */
static pthread_mutex_t g_clblast_lock = PTHREAD_MUTEX_INITIALIZER;

static void load_clblast(void)
{
    static const char *const names[] = {"libclblast.so.1", "libclblast.so"};
    size_t used = 0;
    for (size_t i = 0; i < sizeof names / sizeof names[0] && g_sgemm == NULL; i++) {
        void *h = dlopen(names[i], RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
        const char *why = NULL;
        if (h != NULL) {
            void *sym = dlsym(h, "CLBlastSgemm");
            memcpy(&g_sgemm, &sym, sizeof g_sgemm);
            why = g_sgemm ? NULL : "no CLBlastSgemm symbol";
        } else {
            why = dlerror();
        }
        if (why != NULL && used < sizeof g_clblast_error) {
            used += (size_t)snprintf(g_clblast_error + used, sizeof g_clblast_error - used,
                                     "%s%s", used ? "; " : "", why);
        }
    }
}

/* Loads CLBlast once (g_sgemm), or NOT_SUPPORTED saying why it does not load. */
static rudnn_status_t clblast_load(void)
{
    pthread_once(&g_clblast_once, load_clblast);
    if (g_sgemm == NULL) {
        return ocl_fail(RUDNN_STATUS_NOT_SUPPORTED,
                        "%s: opencl: the TensorCore strategy needs the CLBlast runtime, which "
                        "does not load: %s",
                        op_name, g_clblast_error);
    }
    return RUDNN_STATUS_SUCCESS;
}

/* ---- workspace layout ---------------------------------------------------------------------- */

/* Offsets and total, in floats. */
typedef struct gemm_layout {
    uint64_t xy, c, w, total;
} gemm_layout_t;

/* a * b, or 0 with *ok cleared when it exceeds limit. */
static uint64_t mul_checked(uint64_t a, uint64_t b, uint64_t limit, int *ok)
{
    if (a != 0 && b > limit / a) {
        *ok = 0;
        return 0;
    }
    return a * b;
}

static int gemm_layout(const rudnn_moe_rows_plan_t *plan, gemm_layout_t *l)
{
    const uint64_t limit = (uint64_t)(SIZE_MAX / 4u) / 4u; /* each part, and the sum, in bytes */
    int ok = plan->rows >= 0 && plan->hidden >= 1 && plan->inter >= 1;
    const uint64_t rows = ok ? (uint64_t)plan->rows : 0, h = ok ? (uint64_t)plan->hidden : 0;
    const uint64_t i = ok ? (uint64_t)plan->inter : 0;
    const uint64_t xy = mul_checked(rows, h, limit, &ok);
    const uint64_t c = mul_checked(rows, mul_checked(2u, i, limit, &ok), limit, &ok);
    const uint64_t w = mul_checked(3u, mul_checked(i, h, limit, &ok), limit, &ok);
    l->xy = 0;
    l->c = xy;
    l->w = xy + c;
    l->total = xy + c + w;
    return ok;
}

rudnn_status_t ocl_experts_gemm_workspace(void *device, const rudnn_moe_rows_plan_t *plan,
                                          size_t *bytes)
{
    (void)device;
    gemm_layout_t l;
    if (!gemm_layout(plan, &l)) {
        return ocl_fail(RUDNN_STATUS_NOT_SUPPORTED,
                        "opencl: TensorCore (CLBlast) workspace for rows %lld, hidden %lld, inter "
                        "%lld exceeds the address space",
                        (long long)plan->rows, (long long)plan->hidden, (long long)plan->inter);
    }
    *bytes = plan->rows == 0 ? 0 : (size_t)(l.total * 4u); /* no rows: nothing runs */
    return RUDNN_STATUS_SUCCESS;
}

const char *ocl_clblast_unavailable(void)
{
    pthread_once(&g_clblast_once, load_clblast);
    return g_sgemm != NULL ? NULL : g_clblast_error;
}

/* ---- errors ---------------------------------------------------------------------------------- */

static const char *clblast_name(CLBlastStatusCode s)
{
    switch (s) {
    case CLBlastOpenCLCompilerNotAvailable: return "CLBlastOpenCLCompilerNotAvailable";
    case CLBlastTempBufferAllocFailure: return "CLBlastTempBufferAllocFailure";
    case CLBlastOpenCLOutOfResources: return "CLBlastOpenCLOutOfResources";
    case CLBlastOpenCLOutOfHostMemory: return "CLBlastOpenCLOutOfHostMemory";
    case CLBlastOpenCLBuildProgramFailure: return "CLBlastOpenCLBuildProgramFailure";
    case CLBlastInvalidValue: return "CLBlastInvalidValue";
    case CLBlastInvalidCommandQueue: return "CLBlastInvalidCommandQueue";
    case CLBlastInvalidMemObject: return "CLBlastInvalidMemObject";
    case CLBlastInvalidLocalThreadsTotal: return "CLBlastInvalidLocalThreadsTotal";
    case CLBlastInvalidLocalThreadsDim: return "CLBlastInvalidLocalThreadsDim";
    case CLBlastNotImplemented: return "CLBlastNotImplemented";
    case CLBlastInvalidMatrixA: return "CLBlastInvalidMatrixA";
    case CLBlastInvalidMatrixB: return "CLBlastInvalidMatrixB";
    case CLBlastInvalidMatrixC: return "CLBlastInvalidMatrixC";
    case CLBlastInvalidDimension: return "CLBlastInvalidDimension";
    case CLBlastInvalidLeadDimA: return "CLBlastInvalidLeadDimA";
    case CLBlastInvalidLeadDimB: return "CLBlastInvalidLeadDimB";
    case CLBlastInvalidLeadDimC: return "CLBlastInvalidLeadDimC";
    case CLBlastInsufficientMemoryA: return "CLBlastInsufficientMemoryA";
    case CLBlastInsufficientMemoryB: return "CLBlastInsufficientMemoryB";
    case CLBlastInsufficientMemoryC: return "CLBlastInsufficientMemoryC";
    case CLBlastInvalidLocalMemUsage: return "CLBlastInvalidLocalMemUsage";
    case CLBlastDatabaseError: return "CLBlastDatabaseError";
    case CLBlastUnknownError: return "CLBlastUnknownError";
    case CLBlastUnexpectedError: return "CLBlastUnexpectedError";
    default: return "see clblast_c.h";
    }
}

/* A CLBlast failure as a status: allocation failures are ALLOC_FAILED, argument complaints are
 * our bug (INTERNAL), the rest (compile, launch) DEVICE_ERROR. */
static rudnn_status_t clblast_fail(CLBlastStatusCode s, const char *which, long long e,
                                   size_t m, size_t n, size_t k)
{
    rudnn_status_t st = RUDNN_STATUS_DEVICE_ERROR;
    if (s == CLBlastTempBufferAllocFailure || s == CLBlastOpenCLOutOfHostMemory) {
        st = RUDNN_STATUS_ALLOC_FAILED;
    } else if (s >= CLBlastInvalidMatrixA && s <= CLBlastInsufficientMemoryY) {
        st = RUDNN_STATUS_INTERNAL;
    }
    return ocl_fail(st,
                    "%s: opencl: CLBlastSgemm (%s, expert %lld, m %zu n %zu k %zu) failed: CLBlast "
                    "status %d (%s); expert_output was not written",
                    op_name, which, e, m, n, k, (int)s, clblast_name(s));
}

/* ---- launches -------------------------------------------------------------------------------- */

/* n items of kernel k, GEMM_LOCAL (or less) per group. */
static rudnn_status_t launch_items(ocl_queue_t *q, ocl_kernel_set_t *ks, int k, karg_list_t args,
                                   uint64_t n)
{
    const size_t local = ocl_local_cap(q->dev, ks, GEMM_LOCAL);
    return ocl_enqueue_groups(q, ks, k, k_names, op_name, args, (n + local - 1) / local, local);
}

/* C [m, n] (ldc) = A [m, k] (lda) B^T, B [n, k] (ldb), all row-major F32 (after clblast_load). */
static CLBlastStatusCode sgemm_abt(ocl_queue_t *q, size_t m, size_t n, size_t k, cl_mem a,
                                   size_t a_off, size_t lda, cl_mem b, size_t b_off, size_t ldb,
                                   cl_mem c, size_t c_off, size_t ldc)
{
    /* PoCL before 6.0: the call's kernels finish before the next call starts (ocl_launch.c) */
    cl_event ev = NULL;
    pthread_mutex_lock(&g_clblast_lock);
    CLBlastStatusCode s = g_sgemm(CLBlastLayoutRowMajor, CLBlastTransposeNo, CLBlastTransposeYes, m, n, k, 1.0f, a,
                                  a_off, lda, b, b_off, ldb, 0.0f, c, c_off, ldc, &q->q,
                                  q->dev->serial_launches ? &ev : NULL);
    if (ev != NULL) {
        if (clWaitForEvents(1, &ev) != CL_SUCCESS && s == CLBlastSuccess) {
            s = CLBlastUnknownError;
        }
        clReleaseEvent(ev);
    }
    pthread_mutex_unlock(&g_clblast_lock);
    return s;
}

/* One expert's rows [r0, r0 + m): weights to F32, GEMM 1, epilogue, GEMM 2 (into the rows of
 * X32 this expert consumed). */
static rudnn_status_t run_expert(ocl_queue_t *q, ocl_kernel_set_t *ks, const gemm_layout_t *l,
                                 cl_mem ws, cl_ulong ws0, rudnn_mem_ref_t gate, rudnn_mem_ref_t up,
                                 rudnn_mem_ref_t down, size_t elem, uint64_t e, uint64_t r0,
                                 uint64_t m, uint64_t h, uint64_t in)
{
    const size_t xy = (size_t)(ws0 + l->xy), c = (size_t)(ws0 + l->c), w = (size_t)(ws0 + l->w);
    {
        cl_mem gm = (cl_mem)gate.mem, um = (cl_mem)up.mem, dm = (cl_mem)down.mem;
        cl_ulong go = gate.offset / elem, uo = up.offset / elem, dof = down.offset / elem;
        cl_ulong wo = w, ih = in * h, expert = e;
        const karg_list_t args = KARGS(ARG(gm), ARG(go), ARG(um), ARG(uo), ARG(dm), ARG(dof),
                                       ARG(ws), ARG(wo), GROUP0_ARG(), ARG(ih), ARG(expert));
        RUDNN_TRY(launch_items(q, ks, K_WEIGHTS, args, 3u * ih));
    }
    CLBlastStatusCode s = sgemm_abt(q, m, 2u * in, h, ws, xy + r0 * h, h, ws, w, h, ws,
                                    c + r0 * 2u * in, 2u * in);
    if (s != CLBlastSuccess) {
        return clblast_fail(s, "gate and up", (long long)e, m, 2u * in, h);
    }
    {
        cl_ulong co = c + r0 * 2u * in, n = m * in;
        cl_uint inter = (cl_uint)in;
        const karg_list_t args = KARGS(ARG(ws), ARG(co), GROUP0_ARG(), ARG(n), ARG(inter));
        RUDNN_TRY(launch_items(q, ks, K_SWIGLU, args, n));
    }
    s = sgemm_abt(q, m, h, in, ws, c + r0 * 2u * in, 2u * in, ws, w + 2u * in * h, in, ws,
                  xy + r0 * h, h);
    if (s != CLBlastSuccess) {
        return clblast_fail(s, "down", (long long)e, m, h, in);
    }
    return RUDNN_STATUS_SUCCESS;
}

/* The row offsets [E + 1] on the host (blocking: the one synchronisation of a forward). */
static rudnn_status_t read_offsets(ocl_queue_t *q, rudnn_mem_ref_t offsets, uint64_t experts,
                                   uint32_t **out)
{
    uint32_t *off = (uint32_t *)ocl_malloc((size_t)(experts + 1) * sizeof *off);
    if (off == NULL) {
        return ocl_fail(RUDNN_STATUS_ALLOC_FAILED, "%s: opencl: out of host memory", op_name);
    }
    const cl_int err = clEnqueueReadBuffer(q->q, (cl_mem)offsets.mem, CL_TRUE, offsets.offset,
                                           (size_t)(experts + 1) * sizeof *off, off, 0, NULL, NULL);
    if (err != CL_SUCCESS) {
        free(off);
        return ocl_fail(RUDNN_STATUS_DEVICE_ERROR,
                        "%s: opencl: clEnqueueReadBuffer(offsets) failed: %s (%d)", op_name,
                        ocl_error_name(err), (int)err);
    }
    *out = off;
    return RUDNN_STATUS_SUCCESS;
}

/* Dispatch made offsets: 0, non-decreasing, rows. Anything else is a bug upstream; checked
 * before anything is enqueued so that nothing is written then. */
static rudnn_status_t check_offsets(const uint32_t *off, uint64_t experts, uint64_t rows)
{
    for (uint64_t e = 0; e <= experts; e++) {
        const int bad = (e == 0 && off[0] != 0) || (e > 0 && off[e] < off[e - 1]) ||
                        (e == experts && off[e] != rows);
        if (bad) {
            return ocl_fail(RUDNN_STATUS_INTERNAL,
                            "%s: opencl: offsets[%llu] = %u breaks 0 = offsets[0] <= ... <= "
                            "offsets[%llu] = %llu rows",
                            op_name, (unsigned long long)e, off[e], (unsigned long long)experts,
                            (unsigned long long)rows);
        }
    }
    return RUDNN_STATUS_SUCCESS;
}

rudnn_status_t ocl_experts_gemm(void *queue, const rudnn_moe_rows_plan_t *plan,
                                rudnn_mem_ref_t tokens, rudnn_mem_ref_t offsets,
                                rudnn_mem_ref_t gate, rudnn_mem_ref_t up, rudnn_mem_ref_t down,
                                rudnn_mem_ref_t act, rudnn_mem_ref_t out)
{
    ocl_queue_t *q = (ocl_queue_t *)queue;
    int code;
    size_t elem;
    RUDNN_TRY(ocl_dtype_code(plan->dtype, op_name, "weight", &code, &elem));
    /* the SwiGLU epilogue takes inter as a uint, which ops/ does not bound */
    if ((uint64_t)plan->inter > UINT32_MAX) {
        return ocl_fail(RUDNN_STATUS_INTERNAL, "%s: opencl: TensorCore plan inter %lld exceeds %u",
                        op_name, (long long)plan->inter, (unsigned)UINT32_MAX);
    }
    /* cannot overflow: ops/ sized the workspace (at offset 0) with
     * ocl_experts_gemm_workspace, which fails where gemm_layout does */
    gemm_layout_t l;
    (void)gemm_layout(plan, &l);
    RUDNN_TRY(clblast_load());
    ocl_kernel_set_t *ks;
    char options[64];
    snprintf(options, sizeof options, "-DRUDNN_DTYPE=%d", code);
    RUDNN_TRY(ocl_program_get(q->dev, "moe_gemm.cl", rudnn_ocl_src_moe_gemm, options, k_names,
                              K_COUNT, &ks));
    uint32_t *off = NULL;
    RUDNN_TRY(read_offsets(q, offsets, (uint64_t)plan->experts, &off));
    const uint64_t rows = (uint64_t)plan->rows, h = (uint64_t)plan->hidden;
    const uint64_t in = (uint64_t)plan->inter;
    cl_mem ws = (cl_mem)act.mem;
    const cl_ulong ws0 = act.offset / 4u;
    rudnn_status_t st = check_offsets(off, (uint64_t)plan->experts, rows);

    /* X32 = f32(tokens) */
    if (st == RUDNN_STATUS_SUCCESS) {
        cl_mem tm = (cl_mem)tokens.mem;
        cl_ulong to = tokens.offset / elem, xo = ws0 + l.xy, n = rows * h;
        const karg_list_t args = KARGS(ARG(tm), ARG(to), ARG(ws), ARG(xo), GROUP0_ARG(), ARG(n));
        st = launch_items(q, ks, K_TO_F32, args, n);
    }
    for (uint64_t e = 0; st == RUDNN_STATUS_SUCCESS && e < (uint64_t)plan->experts; e++) {
        if (off[e + 1] > off[e]) {
            st = run_expert(q, ks, &l, ws, ws0, gate, up, down, elem, e, off[e],
                            off[e + 1] - off[e], h, in);
        }
    }
    free(off);
    if (st != RUDNN_STATUS_SUCCESS) {
        return st;
    }
    /* out = round(Y) */
    cl_mem om = (cl_mem)out.mem;
    cl_ulong yo = ws0 + l.xy, oo = out.offset / elem, n = rows * h;
    const karg_list_t args = KARGS(ARG(ws), ARG(yo), ARG(om), ARG(oo), GROUP0_ARG(), ARG(n));
    return launch_items(q, ks, K_FROM_F32, args, n);
}

