import 'reflect-metadata';
import { ValidationPipe } from '@nestjs/common';
import { ConfigService } from '@nestjs/config';
import { NestFactory } from '@nestjs/core';
import type { AddressInfo } from 'net';
import { AppModule } from './app.module';
import type { AppConfig } from './config/app-config';
import { announce } from './events/announce';

async function bootstrap(): Promise<void> {
  const app = await NestFactory.create(AppModule, { logger: ['error', 'warn'] });
  app.useGlobalPipes(new ValidationPipe({ whitelist: true, forbidNonWhitelisted: true, transform: true }));
  // SIGTERM/SIGINT close the app: the lock module releases what it holds, SQLite is closed.
  app.enableShutdownHooks();
  const config = app.get<ConfigService<AppConfig, true>>(ConfigService);
  await app.listen(config.get('PORT', { infer: true }));
  const { port } = app.getHttpServer().address() as AddressInfo;
  announce('listening', { instance: config.get('INSTANCE', { infer: true }), port, lockMode: config.get('LOCK_MODE', { infer: true }) });
}

bootstrap().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
