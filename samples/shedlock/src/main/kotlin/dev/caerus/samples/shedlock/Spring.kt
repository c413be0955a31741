// The same three instances as Spring applications: @Scheduled(fixedRate = 2000) with
// @SchedulerLock(name = "spring-report"), the LockProvider bean a DlsLockProvider.
package dev.caerus.samples.shedlock

import dev.caerus.dls.dlsClient
import dev.caerus.dls.shedlock.DlsLockProvider
import java.time.Duration
import net.javacrumbs.shedlock.core.LockProvider
import net.javacrumbs.shedlock.spring.annotation.EnableSchedulerLock
import net.javacrumbs.shedlock.spring.annotation.SchedulerLock
import org.springframework.beans.factory.annotation.Value
import org.springframework.context.annotation.AnnotationConfigApplicationContext
import org.springframework.context.annotation.Bean
import org.springframework.context.annotation.Configuration
import org.springframework.core.env.MapPropertySource
import org.springframework.scheduling.annotation.EnableScheduling
import org.springframework.scheduling.annotation.Scheduled

@Configuration
@EnableScheduling
@EnableSchedulerLock(defaultLockAtMostFor = "1m")
open class ReportApp {
    @Bean
    open fun lockProvider(@Value("\${dls.endpoints}") endpoints: String): LockProvider =
        // Comma-separated; empty: the SDK reads DLS_ENDPOINTS.
        DlsLockProvider(dlsClient(*endpoints.split(',').filter { it.isNotBlank() }.toTypedArray()), "samples", oncePer = Duration.ofSeconds(6))

    @Bean
    open fun reportJob(@Value("\${instance}") name: String): ReportJob = ReportJob(name)
}

open class ReportJob(private val name: String) {
    @Scheduled(fixedRate = 2000)
    @SchedulerLock(name = "spring-report")
    open fun report() {
        // The job: whatever must not happen twice in a slot.
        ranInSlot(name, DlsLockProvider.currentClaim()!!.slot.toLong())
    }
}

/** Starts one Spring application context per instance; closing it stops its scheduler. */
fun startSpringInstance(name: String, endpoints: List<String>): AutoCloseable =
    AnnotationConfigApplicationContext().apply {
        environment.propertySources.addFirst(MapPropertySource("sample", mapOf("instance" to name, "dls.endpoints" to endpoints.joinToString(","))))
        register(ReportApp::class.java)
        refresh()
    }
