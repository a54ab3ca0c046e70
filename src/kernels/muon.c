/*
 * muon.c — Muon's orthogonalisation: the Newton-Schulz iteration on one
 * matrix, through the linear layers' GEMMs (matmul.c: cblas_sgemm, or the
 * naive twins under BLAS=0), so it shares their thread split and their
 * thread-count-independent bits.
 */
#include "kernels.h"

#include <math.h>
#include <string.h>

size_t newton_schulz_scratch_floats(int rows, int cols) {
    const size_t s = (size_t)(rows < cols ? rows : cols);
    return 2 * (size_t)rows * (size_t)cols + 2 * s * s;
}

void newton_schulz(float *out, const float *g, int rows, int cols, int steps, float a, float b, float c, float eps,
                   float *scratch) {
    /* the iteration runs on the short side first (X is s x l, s <= l), so
     * that its Gram matrices are s x s, the smaller */
    const int tr = rows > cols, s = tr ? cols : rows, l = tr ? rows : cols;
    const size_t sl = (size_t)s * l, ss = (size_t)s * s;
    float *X = scratch, *Y = X + sl, *A = Y + sl, *AA = A + ss;
    if (tr) {
        #pragma omp parallel for
        for (int i = 0; i < s; i++)
            for (int j = 0; j < l; j++) X[(size_t)i * l + j] = g[(size_t)j * cols + i];
    } else {
        memcpy(X, g, sl * sizeof(float));
    }
    /* normalised by the Frobenius norm so that every singular value is at
     * most 1, inside the iteration's basin (eps: a zero update stays zero) */
    const float d = (float)sqrt(sumsq(X, sl)) + eps;
    #pragma omp parallel for
    for (size_t i = 0; i < sl; i++) X[i] /= d;
    for (int k = 0; k < steps; k++) {
        /* A = X X^T; AA = A A (= A A^T: A is symmetric); B = b A + c AA
         * (into A); X = a X + B X */
        matmul_forward(A, X, X, NULL, s, l, s);
        matmul_forward(AA, A, A, NULL, s, s, s);
        #pragma omp parallel for
        for (size_t i = 0; i < ss; i++) A[i] = b * A[i] + c * AA[i];
        matmul_backward_dinp_first(Y, A, X, s, l, s);
        #pragma omp parallel for
        for (size_t i = 0; i < sl; i++) X[i] = a * X[i] + Y[i];
    }
    if (tr) {
        #pragma omp parallel for
        for (int j = 0; j < rows; j++)
            for (int i = 0; i < cols; i++) out[(size_t)j * cols + i] = X[(size_t)i * l + j];
    } else {
        memcpy(out, X, sl * sizeof(float));
    }
}
