/* ProcessPrng for wine 8.0 (Debian 12), which lacks bcryptprimitives.dll: Rust's std (since
 * 1.78) and getrandom take their random bytes from it, so a Rust .exe does not start there.
 * Windows 10 and later and wine 9 have it. windows.sh builds this with zig into the test's
 * wine prefix only; it is never shipped. */
#include <windows.h>

BOOLEAN WINAPI SystemFunction036(PVOID buffer, ULONG length); /* RtlGenRandom, advapi32 */

__declspec(dllexport) BOOL WINAPI ProcessPrng(PBYTE data, SIZE_T len) {
    while (len) {
        ULONG n = len > 0x40000000 ? 0x40000000 : (ULONG)len;
        if (!SystemFunction036(data, n)) return FALSE;
        data += n;
        len -= n;
    }
    return TRUE;
}
