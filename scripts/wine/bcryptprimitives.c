/*
 * A stand-in for Windows 10's bcryptprimitives.dll, for running peerfs.exe under Wine
 * releases that lack it (Debian 12's Wine 8.0). Go's Windows runtime (1.22 and later) loads
 * ProcessPrng from this DLL at start-up and stops with "bcryptprimitives.dll not found"
 * without it. ProcessPrng fills a buffer from the system's random generator; here it calls
 * RtlGenRandom (advapi32's SystemFunction036), which Wine implements. Tests only: it is
 * copied into the Wine prefix that scripts/wine-test.sh makes, never shipped.
 */
#include <windows.h>

BOOLEAN WINAPI SystemFunction036(PVOID buffer, ULONG length);

BOOL WINAPI ProcessPrng(PBYTE data, SIZE_T length)
{
	while (length > 0) {
		ULONG n = length > 0x40000000 ? 0x40000000 : (ULONG)length;
		if (!SystemFunction036(data, n))
			return FALSE;
		data += n;
		length -= n;
	}
	return TRUE;
}
